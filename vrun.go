package vrun

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/vrun-go/vrun/engine"
	"github.com/vrun-go/vrun/model"
	"github.com/vrun-go/vrun/model/onnx"
	"github.com/vrun-go/vrun/rt"

	// Every backend; each reports why it is unavailable where it cannot
	// start (no driver, built without cgo).
	_ "github.com/vrun-go/vrun/clshim"
	_ "github.com/vrun-go/vrun/cpu"
	_ "github.com/vrun-go/vrun/cudashim"
	_ "github.com/vrun-go/vrun/rt/vulkan"
)

// Options configures Load.
type Options struct {
	// Device selects the device: "auto" (or ""), "cpu", "vulkan",
	// "vulkan:1", "cuda:0", "opencl:0".
	Device string
	// Logf, if set, receives progress and the reasons "auto" skipped a
	// backend.
	Logf func(format string, args ...any)
	// Shapes binds dynamic input dims by input name.
	Shapes map[string][]int
	// Parallel is the most concurrent runs, each with its own arena
	// (default 1: runs are serialised).
	Parallel int
	// Profile records per-node device times (Model.Profile).
	Profile bool
}

// Model is a loaded model planned on one device.
type Model struct {
	*engine.Session
	Graph  *model.Model
	Device rt.Device
}

// Load reads a model file (model.bin, or an ONNX model converted in
// memory; see LoadGraph) and plans it on the selected device. The caller
// must Close the result.
func Load(path string, opts Options) (*Model, error) {
	g, err := LoadGraph(path)
	if err != nil {
		return nil, err
	}
	m, err := New(g, opts)
	if err != nil {
		g.Close()
		return nil, err
	}
	return m, nil
}

// LoadGraph reads a model graph: a .onnx file is imported with
// onnx.ImportFile (every operator the engine does not support is listed in
// one error), anything else is read as model.bin with model.Load.
func LoadGraph(path string) (*model.Model, error) {
	if strings.EqualFold(filepath.Ext(path), ".onnx") {
		return onnx.ImportFile(path, onnx.Options{Supported: engine.SupportedOps})
	}
	return model.Load(path)
}

// New plans an in-memory model graph on the selected device. Close
// releases the device and the graph.
func New(g *model.Model, opts Options) (*Model, error) {
	dev, err := rt.Open(opts.Device, opts.Logf)
	if err != nil {
		return nil, err
	}
	s, err := engine.New(g, dev, engine.Options{Shapes: opts.Shapes, Parallel: opts.Parallel, Profile: opts.Profile})
	if err != nil {
		dev.Close()
		return nil, err
	}
	return &Model{Session: s, Graph: g, Device: dev}, nil
}

// Run runs the model once; see engine.Session.Run.
func (m *Model) Run(ctx context.Context, inputs map[string]*rt.Tensor) (map[string]*rt.Tensor, error) {
	return m.Session.Run(ctx, inputs)
}

// Close frees the session, the device and the model's memory map.
func (m *Model) Close() error {
	return errors.Join(m.Session.Close(), m.Device.Close(), m.Graph.Close())
}

// DescribeDevices returns a human-readable list of every backend and
// device, with the reason for each unavailable backend.
func DescribeDevices() string {
	var b strings.Builder
	for _, l := range rt.ListDevices() {
		if l.Err != nil {
			fmt.Fprintf(&b, "%-8s unavailable: %v\n", l.Backend, l.Err)
			continue
		}
		if len(l.Devices) == 0 {
			fmt.Fprintf(&b, "%-8s no devices\n", l.Backend)
		}
		for _, d := range l.Devices {
			fmt.Fprintf(&b, "%-10s %s [%s]\n", d.Spec(), d.Name, d.Kind)
			if d.Driver != "" {
				fmt.Fprintf(&b, "    driver: %s\n", d.Driver)
			}
			fmt.Fprintf(&b, "    memory: %s  fp16: %v  fp64: %v  unified: %v\n", FormatBytes(d.Memory), d.FP16, d.FP64, d.Unified)
			for _, kv := range d.Details {
				fmt.Fprintf(&b, "    %s: %s\n", kv[0], kv[1])
			}
		}
	}
	return b.String()
}

// FormatBytes formats a byte count with a binary unit: "1.5 MiB".
func FormatBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for v := n / unit; v >= unit; v /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
