package vrun_test

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/vrun-go/vrun"
	"github.com/vrun-go/vrun/data"
	"github.com/vrun-go/vrun/internal/gomnist"
	"github.com/vrun-go/vrun/model"
	"github.com/vrun-go/vrun/rt"
	"github.com/vrun-go/vrun/train"
)

// LeNet-5 on the 10,000 MNIST test images in one batch: its first Conv's
// output (10000×6×28×28 f32, 179 MiB) is more than lavapipe's
// maxStorageBufferRange (128 MiB), so the batch runs in chunks; the
// logits match the CPU backend's, which runs it whole.
func TestLeNetMNISTBatchOnVulkan(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	vk, err := vrun.New(mustLeNet(t), vrun.Options{Device: "vulkan"})
	if errors.Is(err, rt.ErrUnavailable) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer vk.Close()
	info := vk.Device.Info()
	dir, err := gomnist.Dir()
	if err != nil {
		t.Skip(err)
	}
	d, err := data.ReadMNISTDir(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	x := rt.FromFloat64(rt.F32, d.X.Float64s(), d.X.Shape...)
	for i := range x.Len() {
		x.SetFloat64(i, x.Float64(i)/255)
	}
	need := int64(10000 * 6 * 28 * 28 * 4)
	if info.MaxRange == 0 || info.MaxRange >= need {
		t.Logf("%s spans %d bytes per operand: the batch fits without chunks", info.Name, info.MaxRange)
	}
	in := map[string]*rt.Tensor{"x": x}
	t0 := time.Now()
	got, err := vk.Run(context.Background(), in)
	t.Logf("vulkan run %v", time.Since(t0))
	if err != nil {
		t.Fatal(err)
	}
	pi := vk.Info()
	t.Logf("%s: %d rows in chunks of %d (%s)", info.Name, pi.Rows, pi.ChunkRows, pi.ChunkReason)
	if info.MaxRange > 0 && info.MaxRange < need && (pi.ChunkRows == 0 || pi.Rows != 10000) {
		t.Errorf("not chunked: %+v", pi)
	}
	cpu, err := vrun.New(mustLeNet(t), vrun.Options{Device: "cpu"})
	if err != nil {
		t.Fatal(err)
	}
	defer cpu.Close()
	t0 = time.Now()
	want, err := cpu.Run(context.Background(), in)
	t.Logf("cpu run %v", time.Since(t0))
	if err != nil {
		t.Fatal(err)
	}
	g, w := got["logits"], want["logits"]
	if g.Len() != 100000 || w.Len() != 100000 {
		t.Fatalf("logits %v and %v", g.Shape, w.Shape)
	}
	worst := 0.0
	for i := range g.Len() {
		worst = math.Max(worst, math.Abs(g.Float64(i)-w.Float64(i)))
	}
	if worst > 1e-4 {
		t.Errorf("vulkan logits differ from the CPU's by %g", worst)
	}
}

func mustLeNet(t *testing.T) *model.Model {
	t.Helper()
	m, err := train.Arch("lenet", train.ArchOptions{Sample: []int{1, 28, 28}, Outputs: 10, Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	return m
}
