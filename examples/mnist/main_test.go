package main

import (
	"context"
	"io"
	"testing"

	"github.com/vrun-go/vrun/internal/gomnist"
)

// A short run of the example on real MNIST (the first 2000 training and
// test images, 2 epochs: 64 steps) stays above an accuracy floor (87.4 %
// measured on the CPU, which is deterministic). The full run is
// the example itself; docs/benchmarks.md records it.
func TestShortRun(t *testing.T) {
	if _, err := gomnist.Dir(); err != nil {
		t.Skip(err)
	}
	res, err := run(context.Background(), options{device: "cpu", epochs: 2, batch: 64, lr: 5e-3, seed: 1, limit: 2000, crop: 0}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("test accuracy %.2f%% on the first 2000 test images", 100*res.Final.Accuracy)
	if res.Final.Accuracy < 0.8 {
		t.Errorf("test accuracy %.2f%%, want >= 80%%", 100*res.Final.Accuracy)
	}
}
