package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/vrun-go/vrun"
	"github.com/vrun-go/vrun/bench/internal/ortpeer"
	"github.com/vrun-go/vrun/rt"
)

// loadModels reads the models of -models: "" for the repository's
// (testdata/models and testdata/e2e, see ortpeer.RepoModels), else a
// comma-separated list of "repo" (those), files (.onnx, model.bin) and
// directories, whose *.onnx and *.bin files are taken, each with
// NAME.x.npy beside it as its input when present
// (testdata/models/export.py writes them so), random values otherwise.
// model.bin files are exported to ONNX in tmp for onnxruntime.
func loadModels(spec, tmp string, quick bool) ([]*ortpeer.Model, error) {
	if spec == "" {
		keep := func(string) bool { return true }
		if quick {
			keep = ortpeer.Keep("lstm,transformer,e2e_mlp,e2e_cnn")
		}
		return ortpeer.RepoModels(tmp, keep)
	}
	var files []string
	var out []*ortpeer.Model
	fail := func(err error) ([]*ortpeer.Model, error) {
		for _, m := range out {
			m.Close()
		}
		return nil, err
	}
	for _, p := range strings.Split(spec, ",") {
		if p == "" {
			continue
		}
		if p == "repo" {
			ms, err := ortpeer.RepoModels(tmp, func(string) bool { return true })
			if err != nil {
				return fail(err)
			}
			out = append(out, ms...)
			continue
		}
		st, err := os.Stat(p)
		if err != nil {
			return fail(err)
		}
		if !st.IsDir() {
			files = append(files, p)
			continue
		}
		for _, ext := range []string{"*.onnx", "*.bin"} {
			m, _ := filepath.Glob(filepath.Join(p, ext))
			sort.Strings(m)
			files = append(files, m...)
		}
	}
	for _, p := range files {
		name := strings.TrimSuffix(filepath.Base(p), filepath.Ext(p))
		x := strings.TrimSuffix(p, filepath.Ext(p)) + ".x.npy"
		if _, err := os.Stat(x); err != nil {
			x = ""
		}
		onnx := ""
		if strings.EqualFold(filepath.Ext(p), ".onnx") {
			onnx = p
		}
		m, err := ortpeer.LoadModel(name, p, onnx, x)
		if err == nil {
			err = m.ExportONNX(tmp)
		}
		if err != nil {
			if m != nil {
				m.Close()
			}
			return fail(err)
		}
		out = append(out, m)
	}
	return out, nil
}

// nativeBatch is the leading dim of the model's first input as loaded.
func nativeBatch(m *ortpeer.Model) int {
	if in := m.Graph.Inputs(); len(in) > 0 {
		if t := m.Inputs[m.Graph.Tensors[in[0]].Name]; t != nil && len(t.Shape) > 0 {
			return t.Shape[0]
		}
	}
	return 1
}

// batchInputs returns m's inputs with their leading dim made batch (rows
// repeated or cut).
func batchInputs(m *ortpeer.Model, batch int) (map[string]*rt.Tensor, error) {
	out := map[string]*rt.Tensor{}
	for name, t := range m.Inputs {
		if len(t.Shape) == 0 || t.Shape[0] == batch {
			out[name] = t
			continue
		}
		row := len(t.Data) / max(t.Shape[0], 1)
		shape := append([]int{batch}, t.Shape[1:]...)
		nt, err := rt.NewTensor(t.DType, shape...)
		if err != nil {
			return nil, err
		}
		for b := 0; b < batch; b++ {
			src := (b % t.Shape[0]) * row
			copy(nt.Data[b*row:(b+1)*row], t.Data[src:src+row])
		}
		out[name] = nt
	}
	return out, nil
}

// timeModel plans m on dev at the given batch and times it: on a device
// of class cpu with host inputs (Run, as onnxruntime is timed), on a GPU
// with the inputs and outputs kept on the device (RunDevice, as vrun
// -bench -resident and PyTorch's CUDA tensors). It returns the median ms
// and the number of timed runs.
func timeModel(m *ortpeer.Model, dev Device, batch int, tm timing) (float64, int, error) {
	in, err := batchInputs(m, batch)
	if err != nil {
		return 0, 0, err
	}
	shapes := map[string][]int{}
	for name, t := range in {
		shapes[name] = t.Shape
	}
	s, err := vrun.New(m.Graph, vrun.Options{Device: dev.Spec, Shapes: shapes})
	if err != nil {
		return 0, 0, err
	}
	// Not s.Close: that closes the graph too, which the other devices
	// still plan.
	defer func() {
		s.Session.Close()
		rt.CloseAll(s.Devices)
	}()
	ctx := context.Background()
	run := func() error { _, err := s.Run(ctx, in); return err }
	if dev.Class == ClassGPU {
		din := map[string]*rt.DeviceTensor{}
		defer func() {
			for _, t := range din {
				t.Free()
			}
		}()
		for name, t := range in {
			d, err := s.ToDevice(t)
			if err != nil {
				return 0, 0, fmt.Errorf("input %s to the device: %w", name, err)
			}
			din[name] = d
		}
		run = func() error {
			out, err := s.RunDevice(ctx, din)
			for _, t := range out {
				t.Free()
			}
			return err
		}
	}
	for i := 0; i < 3; i++ {
		if err := run(); err != nil {
			return 0, 0, err
		}
	}
	return tm.median(run)
}

// batchesFor lists the batches a model runs at on a device: its own, and
// on a GPU the extra ones where the model's batch dim is dynamic.
func batchesFor(m *ortpeer.Model, class string, extra []int) []int {
	b := []int{nativeBatch(m)}
	if class != ClassGPU || !dynamicBatch(m) {
		return b
	}
	for _, x := range extra {
		if x != b[0] {
			b = append(b, x)
		}
	}
	return b
}

// dynamicBatch says whether the leading dim of m's first input is
// dynamic (named or unknown), so that other batches can be planned.
func dynamicBatch(m *ortpeer.Model) bool {
	in := m.Graph.Inputs()
	if len(in) == 0 {
		return false
	}
	sh := m.Graph.Tensors[in[0]].Shape
	return len(sh) > 0 && sh[0] <= 0
}
