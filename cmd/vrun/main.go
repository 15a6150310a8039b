package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/vrun-go/vrun"
	"github.com/vrun-go/vrun/model"
	"github.com/vrun-go/vrun/npy"
	"github.com/vrun-go/vrun/rt"
	"github.com/vrun-go/vrun/rt/vulkan"
)

// usageError marks errors that exit with status 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func main() {
	err := run(os.Args[1:], os.Stdout, os.Stderr)
	if err == nil {
		return
	}
	var ie interrupted
	if errors.As(err, &ie) {
		fmt.Fprintf(os.Stderr, "vrun: %v\n", err)
		os.Exit(130)
	}
	var ue usageError
	if errors.As(err, &ue) {
		help := "vrun -h"
		if len(os.Args) > 1 && (os.Args[1] == "train" || os.Args[1] == "convert") {
			help = "vrun " + os.Args[1] + " -h"
		}
		fmt.Fprintf(os.Stderr, "vrun: %v\nRun '%s' for usage.\n", err, help)
		os.Exit(2)
	}
	fmt.Fprintf(os.Stderr, "vrun: %v\n", err)
	os.Exit(1)
}

const usageText = `vrun runs neural-network models on a GPU (Vulkan, CUDA, OpenCL) or the CPU.

Usage:
  vrun                       run the embedded demo (a handwritten-digits classifier)
  vrun demo                  the same
  vrun [flags] MODEL         run MODEL (model.bin or model.onnx) on random or given inputs
  vrun info [flags] MODEL    show metadata, ops, parameter count and planned arena
  vrun convert M.onnx -o M.bin  convert an ONNX model to vrun's model.bin (vrun convert -h)
  vrun train MODEL -data mnist: [flags]  train a model (vrun train -h for its flags)
  vrun devices               list backends and devices, and why any is unavailable
  vrun version               print the version, the Go toolchain and the backends compiled in

-json prints run results, info, devices, bench and version as JSON.
Exit status: 0 success, 1 failure, 2 usage.

Flags:
`

// runFlags are the flags shared by run, info and demo.
type runFlags struct {
	fs      *flag.FlagSet
	device  string
	inputs  multiFlag
	shapes  multiFlag
	outDir  string
	bench   int
	profile bool
	// resident times -bench runs on inputs already on the device
	// (Model.RunDevice), without the host copies.
	resident bool
	shares   string
	// precision is -precision: "f32" or "f16" (weights stored in f16).
	precision string
	// tune is -tune: the Vulkan GEMM autotuner (VRUN_VK_TUNE=1).
	tune    bool
	seed    uint64
	verbose bool
	json    bool
	version bool
}

// maxBench is the most runs -bench times.
const maxBench = 1_000_000

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

func newFlags(stderr io.Writer) *runFlags {
	f := &runFlags{fs: flag.NewFlagSet("vrun", flag.ContinueOnError)}
	f.fs.SetOutput(io.Discard) // errors are reported once, by main
	f.fs.StringVar(&f.device, "device", "auto", "device: auto, cpu, vulkan, vulkan:N, cuda:N, opencl:N, or a comma-separated `list` (cuda:0,cuda:1 or cpu,opencl:0) to split each batch across")
	f.fs.Var(&f.inputs, "i", "input from a .npy file, as `name=file.npy` (repeatable)")
	f.fs.Var(&f.shapes, "shape", "bind a dynamic input shape, as `name=1x3x224x224` (repeatable)")
	f.fs.StringVar(&f.outDir, "o", "", "write outputs as .npy files into `DIR`")
	f.fs.IntVar(&f.bench, "bench", 0, "warm up, then time `N` runs (1 to 1000000)")
	f.fs.BoolVar(&f.profile, "profile", false, "print the slowest ops of the last run and the device memory")
	f.fs.BoolVar(&f.resident, "resident", false, "with -bench, keep the inputs and outputs on the device while timing (RunDevice), so that the host copies are not timed")
	f.fs.StringVar(&f.shares, "shares", "", "with a -device list, each device's relative share of the batch, as `4,1` (default even)")
	f.fs.StringVar(&f.precision, "precision", "f32", "`dtype` of the Conv, Gemm and MatMul weights on the device: f32, or f16 (half the weight memory and traffic; activations and accumulation stay f32, but for the convolutions that Vulkan runs on f16 tensor cores, which round their input to f16; outputs within about 2e-3 of sum |x||w| of the f32 run)")
	f.fs.BoolVar(&f.tune, "tune", false, "on a Vulkan device, time the kernel choices (tiles, K splits, Winograd, GEMV geometry) of each GEMM, GEMV and convolution shape on this GPU while planning, and keep the fastest in the cache for later runs (sets VRUN_VK_TUNE=1)")
	f.fs.Uint64Var(&f.seed, "seed", 1, "seed for random inputs")
	f.fs.BoolVar(&f.verbose, "v", false, "verbose output")
	f.fs.BoolVar(&f.json, "json", false, "print the results as JSON")
	f.fs.BoolVar(&f.version, "version", false, "print the version and exit")
	f.fs.Usage = func() {}
	return f
}

// parse parses flags interspersed with positional arguments and checks
// their values.
func (f *runFlags) parse(args []string) ([]string, error) {
	pos, err := parseInterspersed(f.fs, args)
	if err != nil {
		return nil, err
	}
	if f.bench < 0 || f.bench > maxBench {
		return nil, usageError{fmt.Sprintf("-bench %d: want 1 to %d runs", f.bench, maxBench)}
	}
	if f.precision != "f32" && f.precision != "f16" {
		return nil, usageError{fmt.Sprintf("-precision %s: want f32 or f16", f.precision)}
	}
	if f.resident && f.bench == 0 {
		return nil, usageError{"-resident needs -bench"}
	}
	if f.resident && strings.Contains(f.device, ",") {
		return nil, usageError{"-resident runs on one device, not on a -device list"}
	}
	for _, fl := range []struct {
		name string
		vals []string
	}{{"-i", f.inputs}, {"-shape", f.shapes}} {
		seen := map[string]bool{}
		for _, v := range fl.vals {
			name, _, _ := strings.Cut(v, "=")
			if seen[name] {
				return nil, usageError{fmt.Sprintf("%s %s given twice", fl.name, name)}
			}
			seen[name] = true
		}
	}
	return pos, nil
}

// parseInterspersed parses flags interspersed with positional arguments.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, usageError{err.Error()}
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	cmd := ""
	if len(args) > 0 && args[0] == "train" {
		return trainCmd(args[1:], stdout, stderr)
	}
	if len(args) > 0 {
		switch args[0] {
		case "convert":
			return convertCmd(args[1:], stdout)
		case "devices", "info", "demo", "run", "version":
			cmd, args = args[0], args[1:]
		}
	}
	f := newFlags(stderr)
	pos, err := f.parse(args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, usageText)
		f.fs.SetOutput(stdout)
		f.fs.PrintDefaults()
		return nil
	}
	if err != nil {
		return err
	}
	if f.version || cmd == "version" {
		if cmd == "version" && len(pos) > 0 {
			return usageError{"version takes no arguments"}
		}
		if f.json {
			return writeJSON(stdout, buildVersion())
		}
		fmt.Fprint(stdout, buildVersion())
		return nil
	}
	switch cmd {
	case "devices":
		if len(pos) > 0 {
			return usageError{"devices takes no arguments"}
		}
		if f.json {
			return writeJSON(stdout, devicesJSON())
		}
		fmt.Fprint(stdout, vrun.DescribeDevices())
		return nil
	case "info":
		if len(pos) != 1 {
			return usageError{"info needs one model file"}
		}
		return info(f, pos[0], stdout, stderr)
	case "demo":
		return demo(f, stdout, stderr)
	}
	switch len(pos) {
	case 0:
		if f.json {
			return usageError{"-json needs a model file (the demo prints text)"}
		}
		return demo(f, stdout, stderr)
	case 1:
		return runModel(f, pos[0], stdout, stderr)
	}
	return usageError{fmt.Sprintf("expected one model file, got %d arguments", len(pos))}
}

// load parses the flags into options and reads the model graph at path.
func (f *runFlags) load(path string, stderr io.Writer) (vrun.Options, *model.Model, error) {
	opts, err := f.options(stderr)
	if err != nil {
		return opts, nil, err
	}
	g, err := vrun.LoadGraph(path)
	return opts, g, err
}

func (f *runFlags) options(stderr io.Writer) (vrun.Options, error) {
	opts := vrun.Options{Device: f.device, Profile: f.profile, Shapes: map[string][]int{}}
	if f.precision == "f16" {
		opts.Precision = rt.F16
	}
	if f.shares != "" {
		for _, v := range strings.Split(f.shares, ",") {
			w, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil || !(w > 0) || math.IsInf(w, 0) {
				return opts, usageError{fmt.Sprintf("-shares %q: want positive numbers separated by commas, as 4,1", f.shares)}
			}
			opts.Shares = append(opts.Shares, w)
		}
	}
	if f.verbose {
		opts.Logf = func(format string, args ...any) { fmt.Fprintf(stderr, "vrun: "+format+"\n", args...) }
	}
	for _, s := range f.shapes {
		name, dims, ok := strings.Cut(s, "=")
		if !ok || name == "" {
			return opts, usageError{fmt.Sprintf("-shape %q: want name=1x3x224x224", s)}
		}
		var shape []int
		for _, d := range strings.Split(dims, "x") {
			v, err := strconv.Atoi(d)
			if err != nil || v < 0 {
				return opts, usageError{fmt.Sprintf("-shape %q: bad dim %q", s, d)}
			}
			shape = append(shape, v)
		}
		opts.Shapes[name] = shape
	}
	return opts, nil
}

// loadInputs reads -i files and fills the remaining inputs with
// deterministic random values.
func loadInputs(f *runFlags, g *model.Model, shapes map[string][]int) (map[string]*rt.Tensor, map[string]string, error) {
	inputs := map[string]*rt.Tensor{}
	source := map[string]string{}
	for _, s := range f.inputs {
		name, file, ok := strings.Cut(s, "=")
		if !ok || name == "" || file == "" {
			return nil, nil, usageError{fmt.Sprintf("-i %q: want name=file.npy", s)}
		}
		i := g.TensorIndex(name)
		if i < 0 || g.Tensors[i].Role != model.Input {
			return nil, nil, fmt.Errorf("-i %s: the model has no input %q (inputs: %s)", s, name, inputNames(g))
		}
		t, err := npy.ReadFile(file)
		if err != nil {
			return nil, nil, fmt.Errorf("-i %s: %w", s, err)
		}
		inputs[name] = t
		source[name] = file
	}
	rng := rand.New(rand.NewPCG(f.seed, 0x9e3779b97f4a7c15))
	for _, i := range g.Inputs() {
		mt := g.Tensors[i]
		if _, ok := inputs[mt.Name]; ok {
			continue
		}
		shape, ok := shapes[mt.Name]
		if !ok {
			shape = make([]int, len(mt.Shape))
			for d, v := range mt.Shape {
				if v < 0 {
					v = 1 // a dynamic dim defaults to 1
				}
				shape[d] = int(v)
			}
		}
		// Check the size before allocating: a huge shape is an error, not
		// a crash of the Go runtime.
		if err := rt.CheckTensorSize(fmt.Sprintf("input %q", mt.Name), mt.DType, shape, true); err != nil {
			return nil, nil, err
		}
		t, err := rt.NewTensor(mt.DType, shape...)
		if err != nil {
			return nil, nil, fmt.Errorf("input %q: %w", mt.Name, err)
		}
		for k := 0; k < t.Len(); k++ {
			switch {
			case mt.DType.IsFloat():
				t.SetFloat64(k, rng.Float64()*2-1)
			case mt.DType == rt.Bool:
				t.SetFloat64(k, float64(rng.IntN(2)))
			default:
				t.SetFloat64(k, float64(rng.IntN(10)))
			}
		}
		inputs[mt.Name] = t
		source[mt.Name] = fmt.Sprintf("random, seed %d", f.seed)
	}
	return inputs, source, nil
}

func inputNames(g *model.Model) string {
	var names []string
	for _, i := range g.Inputs() {
		names = append(names, g.Tensors[i].Name)
	}
	return strings.Join(names, ", ")
}

func shapeString(dt rt.DType, shape []int) string {
	return fmt.Sprintf("%s%v", dt, shape)
}

func runModel(f *runFlags, path string, stdout, stderr io.Writer) error {
	opts, g, err := f.load(path, stderr)
	if err != nil {
		return err
	}
	// Shapes of inputs fed from files bind dynamic dims too.
	inputs, source, err := loadInputs(f, g, opts.Shapes)
	if err != nil {
		g.Close()
		return err
	}
	for name, t := range inputs {
		opts.Shapes[name] = t.Shape
	}
	if f.tune {
		os.Setenv(vulkan.TuneEnv, "1")
	}
	t0 := time.Now()
	m, err := vrun.New(g, opts)
	if err != nil {
		g.Close()
		return err
	}
	defer m.Close()
	loadTime := time.Since(t0)
	return runAndReport(f, m, filepath.Base(path), inputs, source, loadTime, stdout)
}

func runAndReport(f *runFlags, m *vrun.Model, name string, inputs map[string]*rt.Tensor, source map[string]string, loadTime time.Duration, w io.Writer) error {
	ctx := context.Background()
	dref := modelDevices(m)
	rep := runJSON{Model: name, Device: dref, PlanMS: ms(loadTime)}
	for _, i := range m.Graph.Inputs() {
		mt := m.Graph.Tensors[i]
		t := inputs[mt.Name]
		rep.Inputs = append(rep.Inputs, tensorJSON{Name: mt.Name, DType: t.DType.String(), Shape: ints64(t.Shape), Source: source[mt.Name]})
	}
	if f.precision == "f16" {
		in := m.Info()
		rep.Precision = &precisionJSON{Weights: "f16", HalfOps: in.HalfWeightOps, KeptOps: in.HalfKeptOps, Notes: in.PrecisionNotes}
	}
	if !f.json {
		fmt.Fprintf(w, "model    %s\n", name)
		fmt.Fprintf(w, "device   %s  %s\n", dref.Spec, dref.Name)
		if p := rep.Precision; p != nil {
			fmt.Fprintf(w, "weights  f16 on %d of %d Conv/MatMul ops\n", p.HalfOps, p.HalfOps+p.KeptOps)
			for _, n := range p.Notes {
				fmt.Fprintf(w, "         %s\n", n)
			}
		}
		for _, in := range rep.Inputs {
			fmt.Fprintf(w, "input    %-12s %s%v  (%s)\n", in.Name, in.DType, in.Shape, in.Source)
		}
	}
	t0 := time.Now()
	out, err := m.Run(ctx, inputs)
	if err != nil {
		return err
	}
	first := time.Since(t0)
	rep.FirstRunMS = ms(first)
	rep.ChunkRows = m.Info().ChunkRows
	names := labels(m.Graph)
	for _, i := range m.Graph.Outputs() {
		name := m.Graph.Tensors[i].Name
		t := out[name]
		st := statsOf(t)
		oj := tensorJSON{Name: name, DType: t.DType.String(), Shape: ints64(t.Shape), Stats: &st}
		for k := 0; k < min(t.Len(), 8); k++ {
			oj.First = append(oj.First, jsonFloat(t.Float64(k)))
		}
		top, nan, ok := top5(t, names)
		oj.Top5 = top
		rep.Outputs = append(rep.Outputs, oj)
		if f.json {
			continue
		}
		fmt.Fprintf(w, "output   %-12s %s\n", name, shapeString(t.DType, t.Shape))
		fmt.Fprintf(w, "         %s\n", st)
		if t.Len() > 0 {
			vals := make([]string, len(oj.First))
			for k, v := range oj.First {
				vals[k] = fmt.Sprintf("%.6g", float64(v))
			}
			more := ""
			if t.Len() > len(vals) {
				more = " ..."
			}
			fmt.Fprintf(w, "         first: [%s%s]\n", strings.Join(vals, " "), more)
		}
		if ok {
			fmt.Fprintf(w, "         %s\n", top5String(t, top, nan))
		}
	}
	for _, d := range m.Devices {
		if t, ok := d.(interface{ TuneReport() string }); ok {
			if r := t.TuneReport(); r != "" {
				rep.Tune = append(rep.Tune, d.Info().Spec()+": "+r)
			}
		}
	}
	if f.tune && len(rep.Tune) == 0 {
		rep.Tune = []string{"nothing tuned: the autotuner times GEMMs on Vulkan devices"}
	}
	if !f.json {
		fmt.Fprintf(w, "time     plan %s, first run %s\n", fmtDur(loadTime), fmtDur(first))
		for _, r := range rep.Tune {
			fmt.Fprintf(w, "tune     %s\n", r)
		}
		if rep.ChunkRows > 0 {
			fmt.Fprintf(w, "chunks   the batch ran in chunks of %d rows: %s\n", rep.ChunkRows, m.Info().ChunkReason)
		}
	}
	if f.outDir != "" {
		if err := os.MkdirAll(f.outDir, 0o755); err != nil {
			return err
		}
		for k, oj := range rep.Outputs {
			p := filepath.Join(f.outDir, sanitize(oj.Name)+".npy")
			if err := npy.WriteFile(p, out[oj.Name]); err != nil {
				return err
			}
			rep.Outputs[k].File = p
			if !f.json {
				fmt.Fprintf(w, "wrote    %s\n", p)
			}
		}
	}
	if f.bench > 0 {
		run := func() error { _, err := m.Run(ctx, inputs); return err }
		if f.resident {
			r, err := residentRun(ctx, m, inputs)
			if err != nil {
				return err
			}
			defer r.free()
			run = r.run
		}
		b, err := bench(run, m, inputs, f.bench)
		if err != nil {
			return err
		}
		rep.Bench = &b
		if !f.json {
			fmt.Fprintf(w, "bench    %d runs (after %d warm-up): min %.3f ms  median %.3f ms  p90 %.3f ms\n", b.Runs, b.Warmup, b.MinMS, b.MedianMS, b.P90MS)
			fmt.Fprintf(w, "         %.1f runs/s, %.1f items/s (batch %d)\n", b.RunsPerS, b.ItemsPerS, b.Batch)
		}
	}
	if f.profile {
		rep.Profile = profileOf(m)
		rep.Memory = memoryOf(m)
		if !f.json {
			printProfile(w, rep.Profile)
			printMemory(w, rep.Memory)
		}
	}
	if f.json {
		return writeJSON(w, rep)
	}
	return nil
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

func sanitize(name string) string {
	return strings.Map(func(r rune) rune {
		if r == '/' || r == '\\' || r == ':' || r < ' ' {
			return '_'
		}
		return r
	}, name)
}

func fmtDur(d time.Duration) string {
	return fmt.Sprintf("%.3f ms", float64(d)/1e6)
}

// labels returns class names from the model's "labels" metadata
// (comma-separated), if any.
func labels(g *model.Model) []string {
	v, ok := g.MetaValue("labels")
	if !ok || v == "" {
		return nil
	}
	return strings.Split(v, ",")
}

// bench times n calls of run (one run of m on inputs) after a warm-up.
func bench(run func() error, m *vrun.Model, inputs map[string]*rt.Tensor, n int) (benchResult, error) {
	warm := max(1, min(10, n/10))
	for i := 0; i < warm; i++ {
		if err := run(); err != nil {
			return benchResult{}, err
		}
	}
	times := make([]time.Duration, n)
	start := time.Now()
	for i := range times {
		t0 := time.Now()
		if err := run(); err != nil {
			return benchResult{}, err
		}
		times[i] = time.Since(t0)
	}
	total := time.Since(start)
	sort.Slice(times, func(a, b int) bool { return times[a] < times[b] })
	// The batch is the leading dim of the model's first input.
	batch := 1
	if in := m.Graph.Inputs(); len(in) > 0 {
		if t := inputs[m.Graph.Tensors[in[0]].Name]; t != nil && len(t.Shape) > 0 {
			batch = t.Shape[0]
		}
	}
	// A clock that ticks coarsely (Windows: the interrupt time, 0.5-16
	// ms) can see a short benchmark take no time at all; its rates are
	// then 0, "not measured", rather than +Inf.
	perSec := 0.0
	if total > 0 {
		perSec = float64(n) / total.Seconds()
	}
	return benchResult{Runs: n, Warmup: warm, MinMS: ms(times[0]), MedianMS: ms(times[n/2]), P90MS: ms(times[min(n-1, n*9/10)]),
		RunsPerS: perSec, ItemsPerS: perSec * float64(batch), Batch: batch}, nil
}

// resident holds a model's inputs on its device for -resident.
type resident struct {
	ctx context.Context
	m   *vrun.Model
	in  map[string]*rt.DeviceTensor
}

// residentRun copies inputs to m's device once; its run method runs m
// on them with Model.RunDevice and frees the outputs.
func residentRun(ctx context.Context, m *vrun.Model, inputs map[string]*rt.Tensor) (*resident, error) {
	r := &resident{ctx: ctx, m: m, in: map[string]*rt.DeviceTensor{}}
	for name, t := range inputs {
		d, err := m.ToDevice(t)
		if err != nil {
			r.free()
			return nil, fmt.Errorf("-resident: input %q: %w", name, err)
		}
		r.in[name] = d
	}
	return r, nil
}

func (r *resident) run() error {
	out, err := r.m.RunDevice(r.ctx, r.in)
	for _, t := range out {
		t.Free()
	}
	return err
}

func (r *resident) free() {
	for _, t := range r.in {
		t.Free()
	}
}

func profileOf(m *vrun.Model) []profileJSON {
	prof := m.Profile()
	var total time.Duration
	for _, p := range prof {
		total += p.Time
	}
	out := []profileJSON{}
	for _, p := range prof {
		out = append(out, profileJSON{Node: p.Node, Op: p.Op, MS: ms(p.Time), Percent: 100 * float64(p.Time) / float64(max(total, 1))})
	}
	return out
}

func printProfile(w io.Writer, prof []profileJSON) {
	if len(prof) == 0 {
		fmt.Fprintf(w, "profile  (no per-op times from this device)\n")
		return
	}
	total := 0.0
	for _, p := range prof {
		total += p.MS
	}
	fmt.Fprintf(w, "profile  %d nodes, %.3f ms of device time; slowest:\n", len(prof), total)
	top := prof[:min(10, len(prof))]
	width := 0
	for _, p := range top {
		width = max(width, len(p.Node))
	}
	for _, p := range top {
		fmt.Fprintf(w, "         %-*s %-20s %9.3f ms  %5.1f%%\n", width, p.Node, p.Op, p.MS, p.Percent)
	}
}

func info(f *runFlags, path string, stdout, stderr io.Writer) error {
	opts, g, err := f.load(path, stderr)
	if err != nil {
		return err
	}
	rep := infoJSON{Model: path, Meta: map[string]string{}, NodeCounts: map[string]int{}}
	for _, kv := range g.Meta {
		rep.Meta[kv[0]] = kv[1]
	}
	for _, t := range g.Tensors {
		if t.Role == model.Weight {
			rep.Weights++
			rep.Params += int64(len(t.Data) / max(1, t.DType.Size()))
			rep.WeightBytes += int64(len(t.Data))
		}
	}
	for _, n := range g.Nodes {
		rep.NodeCounts[n.Op]++
	}
	rep.Nodes = len(g.Nodes)
	if !f.json {
		fmt.Fprintf(stdout, "model    %s\n", path)
		for _, kv := range g.Meta {
			fmt.Fprintf(stdout, "meta     %s = %s\n", kv[0], kv[1])
		}
		for _, i := range g.Inputs() {
			t := g.Tensors[i]
			fmt.Fprintf(stdout, "input    %-12s %s%v\n", t.Name, t.DType, dimString(t))
		}
		fmt.Fprintf(stdout, "params   %d in %d weights (%s)\n", rep.Params, rep.Weights, vrun.FormatBytes(rep.WeightBytes))
		fmt.Fprintf(stdout, "nodes    %d: %s\n", rep.Nodes, countString(rep.NodeCounts))
	}
	// Plan on the chosen device to report the arena; dynamic dims not
	// given with -shape plan as 1.
	m, err := vrun.New(g, opts)
	if err != nil {
		g.Close()
		return err
	}
	defer m.Close()
	pi := m.Info()
	rep.Device = modelDevices(m)
	rep.Plan = planJSON{InputShapes: pi.InputShapes, Ops: pi.Ops, OpCounts: pi.OpCounts, ArenaBytes: pi.ArenaBytes,
		TensorBytes: pi.TensorBytes, DeviceWeight: pi.WeightBytes, ChunkRows: pi.ChunkRows, Rows: pi.Rows, ChunkReason: pi.ChunkReason}
	for _, t := range m.Inputs() {
		rep.Inputs = append(rep.Inputs, tensorJSON{Name: t.Name, DType: t.DType.String(), Shape: t.Shape, DimNames: t.DimNames})
	}
	for _, t := range m.Outputs() {
		rep.Outputs = append(rep.Outputs, tensorJSON{Name: t.Name, DType: t.DType.String(), Shape: t.Shape, DimNames: t.DimNames})
	}
	if f.json {
		return writeJSON(stdout, rep)
	}
	for _, i := range g.Outputs() {
		name := g.Tensors[i].Name
		fmt.Fprintf(stdout, "output   %-12s %s  (for inputs %v)\n", name, shapeString(pi.OutputTypes[name], pi.OutputShapes[name]), shapesString(pi.InputShapes))
	}
	fmt.Fprintf(stdout, "device   %s  %s\n", rep.Device.Spec, rep.Device.Name)
	if len(m.Devices) > 1 {
		fmt.Fprintf(stdout, "split    each batch across %d devices; the plan below is %s's, for its share\n", len(m.Devices), m.Device.Info().Spec())
	}
	fmt.Fprintf(stdout, "plan     %d primitive ops: %s\n", pi.Ops, countString(pi.OpCounts))
	saved := 0.0
	if pi.TensorBytes > 0 {
		saved = 100 * (1 - float64(pi.ArenaBytes)/float64(pi.TensorBytes))
	}
	chunk := ""
	if pi.ChunkRows > 0 {
		chunk = fmt.Sprintf(" per chunk of %d rows", pi.ChunkRows)
	}
	fmt.Fprintf(stdout, "arena    %s for %s of intermediate tensors (%.0f%% saved by reuse)%s\n",
		vrun.FormatBytes(pi.ArenaBytes), vrun.FormatBytes(pi.TensorBytes), saved, chunk)
	fmt.Fprintf(stdout, "weights  %s on the device\n", vrun.FormatBytes(pi.WeightBytes))
	if pi.ChunkRows > 0 {
		fmt.Fprintf(stdout, "chunks   %d rows run in chunks of %d: %s\n", pi.Rows, pi.ChunkRows, pi.ChunkReason)
	}
	return nil
}

func shapesString(m map[string][]int) string {
	var parts []string
	for k, v := range m {
		parts = append(parts, fmt.Sprintf("%s=%v", k, v))
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}

func dimString(t model.Tensor) string {
	parts := make([]string, len(t.Shape))
	for i, d := range t.Shape {
		switch {
		case d >= 0:
			parts[i] = strconv.FormatInt(d, 10)
		case i < len(t.DimNames) && t.DimNames[i] != "":
			parts[i] = t.DimNames[i]
		default:
			parts[i] = "?"
		}
	}
	return "[" + strings.Join(parts, " ") + "]"
}

func countString(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(a, b int) bool {
		if m[keys[a]] != m[keys[b]] {
			return m[keys[a]] > m[keys[b]]
		}
		return keys[a] < keys[b]
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s×%d", k, m[k])
	}
	return strings.Join(parts, " ")
}
