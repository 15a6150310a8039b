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
		if len(os.Args) > 1 && os.Args[1] == "train" {
			help = "vrun train -h"
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
  vrun convert M.onnx -o M.bin  convert an ONNX model to vrun's model.bin
  vrun train MODEL -data mnist: [flags]  train a model (vrun train -h for its flags)
  vrun devices               list backends and devices, and why any is unavailable

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
	seed    uint64
	verbose bool
}

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

func newFlags(stderr io.Writer) *runFlags {
	f := &runFlags{fs: flag.NewFlagSet("vrun", flag.ContinueOnError)}
	f.fs.SetOutput(io.Discard) // errors are reported once, by main
	f.fs.StringVar(&f.device, "device", "auto", "device: auto, cpu, vulkan, vulkan:N, cuda:N, opencl:N")
	f.fs.Var(&f.inputs, "i", "input from a .npy file, as `name=file.npy` (repeatable)")
	f.fs.Var(&f.shapes, "shape", "bind a dynamic input shape, as `name=1x3x224x224` (repeatable)")
	f.fs.StringVar(&f.outDir, "o", "", "write outputs as .npy files into `DIR`")
	f.fs.IntVar(&f.bench, "bench", 0, "warm up, then time `N` runs")
	f.fs.BoolVar(&f.profile, "profile", false, "print the slowest ops of the last run")
	f.fs.Uint64Var(&f.seed, "seed", 1, "seed for random inputs")
	f.fs.BoolVar(&f.verbose, "v", false, "verbose output")
	f.fs.Usage = func() {}
	return f
}

// parse parses flags interspersed with positional arguments.
func (f *runFlags) parse(args []string) ([]string, error) {
	var pos []string
	for {
		if err := f.fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, usageError{err.Error()}
		}
		args = f.fs.Args()
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
		case "devices", "info", "demo", "run", "convert":
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
	switch cmd {
	case "devices":
		if len(pos) > 0 {
			return usageError{"devices takes no arguments"}
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
	case "convert":
		return convert(f, pos, stdout)
	}
	switch len(pos) {
	case 0:
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
		if !ok || name == "" {
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
	info := m.Device.Info()
	fmt.Fprintf(w, "model    %s\n", name)
	fmt.Fprintf(w, "device   %s  %s\n", info.Spec(), info.Name)
	for _, i := range m.Graph.Inputs() {
		mt := m.Graph.Tensors[i]
		t := inputs[mt.Name]
		fmt.Fprintf(w, "input    %-12s %s  (%s)\n", mt.Name, shapeString(t.DType, t.Shape), source[mt.Name])
	}
	t0 := time.Now()
	out, err := m.Run(ctx, inputs)
	if err != nil {
		return err
	}
	first := time.Since(t0)
	for _, i := range m.Graph.Outputs() {
		name := m.Graph.Tensors[i].Name
		t := out[name]
		fmt.Fprintf(w, "output   %-12s %s\n", name, shapeString(t.DType, t.Shape))
		printStats(w, t)
		printTop5(w, t, labels(m.Graph))
	}
	fmt.Fprintf(w, "time     plan %s, first run %s\n", fmtDur(loadTime), fmtDur(first))
	if f.outDir != "" {
		if err := os.MkdirAll(f.outDir, 0o755); err != nil {
			return err
		}
		for name, t := range out {
			p := filepath.Join(f.outDir, sanitize(name)+".npy")
			if err := npy.WriteFile(p, t); err != nil {
				return err
			}
			fmt.Fprintf(w, "wrote    %s\n", p)
		}
	}
	if f.bench > 0 {
		if err := bench(ctx, m, inputs, f.bench, w); err != nil {
			return err
		}
	}
	if f.profile {
		printProfile(w, m)
	}
	return nil
}

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

func printStats(w io.Writer, t *rt.Tensor) {
	n := t.Len()
	if n == 0 {
		fmt.Fprintf(w, "         (empty)\n")
		return
	}
	mn, mx, sum, sq := math.Inf(1), math.Inf(-1), 0.0, 0.0
	nan := 0
	for i := 0; i < n; i++ {
		v := t.Float64(i)
		if math.IsNaN(v) {
			nan++
			continue
		}
		mn, mx = math.Min(mn, v), math.Max(mx, v)
		sum += v
		sq += v * v
	}
	cnt := float64(n - nan)
	mean := sum / cnt
	std := math.Sqrt(math.Max(0, sq/cnt-mean*mean))
	fmt.Fprintf(w, "         min %.6g  max %.6g  mean %.6g  std %.6g", mn, mx, mean, std)
	if nan > 0 {
		fmt.Fprintf(w, "  NaN %d", nan)
	}
	fmt.Fprintln(w)
	k := min(n, 8)
	vals := make([]string, k)
	for i := range vals {
		vals[i] = fmt.Sprintf("%.6g", t.Float64(i))
	}
	more := ""
	if n > k {
		more = " ..."
	}
	fmt.Fprintf(w, "         first: [%s%s]\n", strings.Join(vals, " "), more)
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

// printTop5 prints the top classes of the first row of a classifier
// output: a float tensor [N, C] or [C] with C >= 2.
func printTop5(w io.Writer, t *rt.Tensor, names []string) {
	if !t.DType.IsFloat() || len(t.Shape) == 0 || len(t.Shape) > 2 {
		return
	}
	c := t.Shape[len(t.Shape)-1]
	if c < 2 || t.Len() == 0 {
		return
	}
	idx := make([]int, c)
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return t.Float64(idx[a]) > t.Float64(idx[b]) })
	var parts []string
	for _, k := range idx[:min(5, c)] {
		label := strconv.Itoa(k)
		if k < len(names) {
			label = fmt.Sprintf("%d %q", k, names[k])
		}
		parts = append(parts, fmt.Sprintf("%s (%.4g)", label, t.Float64(k)))
	}
	row := ""
	if len(t.Shape) == 2 && t.Shape[0] > 1 {
		row = " of row 0"
	}
	fmt.Fprintf(w, "         top-5%s: %s\n", row, strings.Join(parts, ", "))
}

func bench(ctx context.Context, m *vrun.Model, inputs map[string]*rt.Tensor, n int, w io.Writer) error {
	warm := max(1, min(10, n/10))
	for i := 0; i < warm; i++ {
		if _, err := m.Run(ctx, inputs); err != nil {
			return err
		}
	}
	times := make([]time.Duration, n)
	start := time.Now()
	for i := range times {
		t0 := time.Now()
		if _, err := m.Run(ctx, inputs); err != nil {
			return err
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
	perSec := float64(n) / total.Seconds()
	fmt.Fprintf(w, "bench    %d runs (after %d warm-up): min %s  median %s  p90 %s\n", n, warm,
		fmtDur(times[0]), fmtDur(times[n/2]), fmtDur(times[min(n-1, n*9/10)]))
	fmt.Fprintf(w, "         %.1f runs/s, %.1f items/s (batch %d)\n", perSec, perSec*float64(batch), batch)
	return nil
}

func printProfile(w io.Writer, m *vrun.Model) {
	prof := m.Profile()
	if len(prof) == 0 {
		fmt.Fprintf(w, "profile  (no per-op times from this device)\n")
		return
	}
	var total time.Duration
	for _, p := range prof {
		total += p.Time
	}
	fmt.Fprintf(w, "profile  %d nodes, %s of device time; slowest:\n", len(prof), fmtDur(total))
	top := prof[:min(10, len(prof))]
	width := 0
	for _, p := range top {
		width = max(width, len(p.Node))
	}
	for _, p := range top {
		fmt.Fprintf(w, "         %-*s %-20s %12s  %5.1f%%\n", width, p.Node, p.Op, fmtDur(p.Time), 100*float64(p.Time)/float64(max(total, 1)))
	}
}

func info(f *runFlags, path string, stdout, stderr io.Writer) error {
	opts, g, err := f.load(path, stderr)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "model    %s\n", path)
	for _, kv := range g.Meta {
		fmt.Fprintf(stdout, "meta     %s = %s\n", kv[0], kv[1])
	}
	var params, wbytes int64
	nWeights := 0
	for _, t := range g.Tensors {
		if t.Role == model.Weight {
			nWeights++
			params += int64(len(t.Data) / max(1, t.DType.Size()))
			wbytes += int64(len(t.Data))
		}
	}
	for _, i := range g.Inputs() {
		t := g.Tensors[i]
		fmt.Fprintf(stdout, "input    %-12s %s%v\n", t.Name, t.DType, dimString(t))
	}
	fmt.Fprintf(stdout, "params   %d in %d weights (%s)\n", params, nWeights, vrun.FormatBytes(wbytes))
	counts := map[string]int{}
	for _, n := range g.Nodes {
		counts[n.Op]++
	}
	fmt.Fprintf(stdout, "nodes    %d: %s\n", len(g.Nodes), countString(counts))
	// Plan on the chosen device to report the arena.
	if len(opts.Shapes) == 0 {
		opts.Shapes = map[string][]int{}
	}
	for _, i := range g.Inputs() {
		t := g.Tensors[i]
		if _, ok := opts.Shapes[t.Name]; ok {
			continue
		}
		shape := make([]int, len(t.Shape))
		for d, v := range t.Shape {
			shape[d] = int(max(v, 1))
		}
		opts.Shapes[t.Name] = shape
	}
	m, err := vrun.New(g, opts)
	if err != nil {
		g.Close()
		return err
	}
	defer m.Close()
	pi := m.Info()
	for _, i := range g.Outputs() {
		name := g.Tensors[i].Name
		fmt.Fprintf(stdout, "output   %-12s %s  (for inputs %v)\n", name, shapeString(pi.OutputTypes[name], pi.OutputShapes[name]), shapesString(pi.InputShapes))
	}
	fmt.Fprintf(stdout, "device   %s  %s\n", m.Device.Info().Spec(), m.Device.Info().Name)
	fmt.Fprintf(stdout, "plan     %d primitive ops: %s\n", pi.Ops, countString(pi.OpCounts))
	saved := 0.0
	if pi.TensorBytes > 0 {
		saved = 100 * (1 - float64(pi.ArenaBytes)/float64(pi.TensorBytes))
	}
	fmt.Fprintf(stdout, "arena    %s for %s of intermediate tensors (%.0f%% saved by reuse)\n",
		vrun.FormatBytes(pi.ArenaBytes), vrun.FormatBytes(pi.TensorBytes), saved)
	fmt.Fprintf(stdout, "weights  %s on the device\n", vrun.FormatBytes(pi.WeightBytes))
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
