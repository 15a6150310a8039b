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
	// "vulkan:1", "cuda:0", "opencl:0"; or a comma-separated list of
	// devices ("cuda:0,cuda:1", "vulkan:0,cuda:0", "cpu,opencl:0"; see
	// rt.OpenList), over which Run splits each batch (data-parallel
	// inference; see engine.ParallelSession). Shapes and Dims are then the
	// whole batch's.
	Device string
	// Shares, with a device list, is each device's relative share of the
	// batch, in list order ({4, 1}: four rows to the first device for
	// each row to the second), for devices that differ in speed; nil
	// splits evenly. See engine.ParallelSession.SetShares.
	Shares []float64
	// Logf, if set, receives progress and the reasons "auto" skipped a
	// backend.
	Logf func(format string, args ...any)
	// Shapes binds input shapes by input name, for inputs with dynamic
	// dims. Inputs not named here get the model's shape, with each dynamic
	// dim from Dims, or 1. Run plans again for inputs of other shapes.
	Shapes map[string][]int
	// Dims binds dynamic dims by name, for every input that has them:
	// {"batch": 32}. Every name must be a dim name of some input.
	Dims map[string]int
	// NoMmap reads a model.bin file into memory instead of mapping it.
	// On Windows a mapped file cannot be replaced or deleted while the
	// model is open.
	NoMmap bool
	// Parallel is the most concurrent runs, each with its own arena
	// (default 1: runs are serialised).
	Parallel int
	// Profile records per-node device times (Model.Profile).
	Profile bool
	// Precision is the dtype of the constant weights of Conv, Gemm and
	// MatMul on the device: rt.F32 (or 0, the default) or rt.F16, which
	// stores them in half precision while activations, biases and
	// accumulation stay f32; see engine.Options.Precision for where it
	// applies and its tolerance. A device that takes no weight in f16
	// fails New with an *rt.UnsupportedError.
	Precision rt.DType
}

// Errors of Load, New and Run that callers may match with errors.Is and
// errors.As.
var (
	// ErrShape: an input's shape does not fit the model's (or shape
	// inference failed).
	ErrShape = engine.ErrShape
	// ErrDType: an input's dtype is not the model's.
	ErrDType = engine.ErrDType
	// ErrMissingInput: a model input was not given to Run.
	ErrMissingInput = engine.ErrMissingInput
	// ErrUnknownInput: Run, Options.Shapes or Options.Dims names an input
	// or dim the model does not have.
	ErrUnknownInput = engine.ErrUnknownInput
	// ErrTooLarge: a tensor or plan is larger than the device or the host
	// can hold (an *rt.SizeError says what and how large).
	ErrTooLarge = rt.ErrTooLarge
	// ErrIndexOutOfRange: an index of Gather, GatherElements,
	// ScatterElements, GatherND or ScatterND was out of range during Run
	// (an *IndexError names the node).
	ErrIndexOutOfRange = rt.ErrIndexOutOfRange
	// ErrNotSplittable: a model loaded on a device list cannot have its
	// batch split across the devices (no dynamic leading batch dim, or a
	// node that mixes the rows of the batch; the error says which).
	ErrNotSplittable = engine.ErrNotSplittable
	// ErrBatchTooSmall: a run on a device list was given fewer batch rows
	// than devices.
	ErrBatchTooSmall = engine.ErrBatchTooSmall
)

// InputError is the error of a bad input; see engine.InputError.
type InputError = engine.InputError

// IndexError is the error of a run that met an index out of range; see
// rt.IndexError.
type IndexError = rt.IndexError

// TensorInfo describes a model input or output (Model.Inputs,
// Model.Outputs); see engine.TensorInfo.
type TensorInfo = engine.TensorInfo

// Model is a loaded model planned on one device. Inputs and Outputs
// describe its inputs and outputs; Info its plan.
//
// With a device list, Device and Session are the first device's (its
// plan describes every device's, for its share of the batch), Devices
// lists them all, and Split runs the batches across them.
type Model struct {
	*engine.Session
	Graph  *model.Model
	Device rt.Device
	// Devices are the opened devices, in list order (one without a list).
	Devices []rt.Device
	// Split is the data-parallel session over Devices, or nil for one
	// device.
	Split *engine.ParallelSession
}

// Load reads a model file (model.bin, or an ONNX model converted in
// memory; see LoadGraph) and plans it on the selected device. The caller
// must Close the result.
func Load(path string, opts Options) (*Model, error) {
	g, err := loadGraph(path, !opts.NoMmap)
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
// A model.bin file is memory-mapped.
func LoadGraph(path string) (*model.Model, error) { return loadGraph(path, true) }

func loadGraph(path string, mmap bool) (*model.Model, error) {
	if strings.EqualFold(filepath.Ext(path), ".onnx") {
		return onnx.ImportFile(path, onnx.Options{Supported: engine.SupportedOps})
	}
	return model.Load(path, model.UseMmap(mmap))
}

// New plans an in-memory model graph on the selected device. Close
// releases the device and the graph.
func New(g *model.Model, opts Options) (*Model, error) {
	devs, err := rt.OpenList(opts.Device, opts.Logf)
	if err != nil {
		return nil, err
	}
	eo := engine.Options{Shapes: opts.Shapes, Dims: opts.Dims, Parallel: opts.Parallel, Profile: opts.Profile, Precision: opts.Precision}
	if len(opts.Shares) > 0 && len(opts.Shares) != len(devs) {
		return nil, errors.Join(fmt.Errorf("vrun: %d shares for the %d devices of %q", len(opts.Shares), len(devs), opts.Device), rt.CloseAll(devs))
	}
	if len(devs) == 1 {
		s, err := engine.New(g, devs[0], eo)
		if err != nil {
			devs[0].Close()
			return nil, err
		}
		return &Model{Session: s, Graph: g, Device: devs[0], Devices: devs}, nil
	}
	p, err := engine.NewParallelSession(g, devs, eo)
	if err != nil {
		return nil, errors.Join(err, rt.CloseAll(devs))
	}
	if opts.Shares != nil {
		if err := p.SetShares(opts.Shares); err != nil {
			return nil, errors.Join(err, p.Close(), rt.CloseAll(devs))
		}
	}
	return &Model{Session: p.Sessions()[0], Graph: g, Device: devs[0], Devices: devs, Split: p}, nil
}

// Run runs the model once; see engine.Session.Run. Input problems are
// *InputError values matching ErrShape, ErrDType, ErrMissingInput or
// ErrUnknownInput; a cancelled or expired ctx returns ctx.Err().
//
// With a device list, each batch is split across the devices (see
// engine.ParallelSession.Run): a batch of fewer rows than devices is an
// error, and a failed or lost device is named in the error.
func (m *Model) Run(ctx context.Context, inputs map[string]*rt.Tensor) (map[string]*rt.Tensor, error) {
	if m.Split != nil {
		return m.Split.Run(ctx, inputs)
	}
	return m.Session.Run(ctx, inputs)
}

// Device-resident tensors and memory (see docs/memory.md).
type (
	// DeviceTensor is a tensor in device memory; see rt.DeviceTensor.
	DeviceTensor = rt.DeviceTensor
	// MemPool is a caching allocator of device memory; see rt.MemPool.
	MemPool = rt.MemPool
	// MemPoolStats are a pool's statistics; see rt.MemPoolStats.
	MemPoolStats = rt.MemPoolStats
	// MemoryStats are a model's device memory; see engine.MemoryStats.
	MemoryStats = engine.MemoryStats
)

// ToDevice copies host tensor t into a new tensor on the model's device
// (the first, with a device list), from the model's pool, and returns
// when the copy is done. The caller must Free the result. Give it to
// RunDevice (promoted from engine.Session), which runs on the same device
// and returns device tensors: chained models so make no host round trip.
func (m *Model) ToDevice(t *rt.Tensor) (*DeviceTensor, error) {
	return m.Session.Pool().ToDevice(t)
}

// ToHost copies device tensor t into a new host tensor and returns when
// the copy is done; see rt.DeviceTensor.ToHost.
func ToHost(t *DeviceTensor) (*rt.Tensor, error) { return t.ToHost() }

// Close waits for the runs in flight, then frees the session, the device
// and the model's memory map. Runs started after Close fail with
// rt.ErrClosed.
func (m *Model) Close() error {
	if m.Split != nil {
		return errors.Join(m.Split.Close(), rt.CloseAll(m.Devices), m.Graph.Close())
	}
	return errors.Join(m.Session.Close(), m.Device.Close(), m.Graph.Close())
}

// DeviceSpecs returns the selectors of the model's devices, joined by
// commas: "cpu:0" or "cpu:0,opencl:0".
func (m *Model) DeviceSpecs() string {
	var specs []string
	for _, d := range m.Devices {
		specs = append(specs, d.Info().Spec())
	}
	if len(specs) == 0 && m.Device != nil {
		specs = append(specs, m.Device.Info().Spec())
	}
	return strings.Join(specs, ",")
}

// DescribeDevices returns a human-readable list of every backend and
// device, with the reason for each unavailable backend.
func DescribeDevices() string {
	var b strings.Builder
	ls := rt.ListDevices()
	same := rt.SameAs(ls)
	for _, l := range ls {
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
			if d.UUID != "" {
				fmt.Fprintf(&b, "    uuid: %s\n", d.UUID)
			}
			if s := same[d.Spec()]; len(s) > 0 {
				fmt.Fprintf(&b, "    same physical device as: %s\n", strings.Join(s, ", "))
			}
			for _, kv := range d.Details {
				fmt.Fprintf(&b, "    %s: %s\n", kv[0], kv[1])
			}
		}
	}
	return b.String()
}

// FormatBytes formats a byte count with a binary unit: "1.5 MiB".
func FormatBytes(n int64) string { return rt.FormatBytes(n) }
