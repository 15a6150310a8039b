package main

import (
	"context"
	"io"
	"testing"

	"github.com/vrun-go/vrun/data"
)

// WriteSynthetic writes files that the CIFAR-10 reader accepts: the real
// binary format.
func TestSyntheticFormat(t *testing.T) {
	dir := t.TempDir()
	if err := WriteSynthetic(dir, 3, 1); err != nil {
		t.Fatal(err)
	}
	tr, err := data.ReadCIFAR10Dir(dir, true)
	if err != nil {
		t.Fatal(err)
	}
	te, err := data.ReadCIFAR10Dir(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	if tr.Len() != 150 || te.Len() != 30 || tr.Classes != 10 {
		t.Errorf("%d training and %d test images, %d classes; want 150, 30, 10", tr.Len(), te.Len(), tr.Classes)
	}
}

// CI trains the example's CNN on the synthetic data: one short epoch (10
// steps of 25 images) lifts it well above chance (36 % on the CPU, which
// is deterministic).
func TestTrainSynthetic(t *testing.T) {
	res, err := run(context.Background(), options{device: "cpu", epochs: 1, batch: 25, lr: 5e-3, seed: 1, synthetic: 5}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("test accuracy %.2f%% (chance: 10%%)", 100*res.Final.Accuracy)
	if res.Final.Accuracy < 0.25 {
		t.Errorf("test accuracy %.2f%%, want >= 25%%", 100*res.Final.Accuracy)
	}
}
