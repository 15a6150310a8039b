// Command ort times vrun's CPU backend beside onnxruntime (npm
// onnxruntime-node) on the same models, inputs and thread count, and prints
// a table of median latencies with their ratio (vrun / onnxruntime: above
// 1 means vrun is slower).
//
//	go run ./bench/ort [-threads 2] [-runs 30] [-rounds 3] [-short] [-models a,b] [-profile N [-top M]] [extra.onnx ...]
//
// The models are every testdata/models/NAME.onnx with its input
// NAME.x.npy, and the end-to-end models testdata/e2e/NAME.bin with
// NAME/x.npy (exported to ONNX with package export for onnxruntime), plus
// any ONNX files named on the command line (fed deterministic random
// inputs, dynamic dims bound to 1). vrun runs with GOMAXPROCS = -threads;
// onnxruntime with -threads intra-op threads, one inter-op thread, the
// sequential executor and its default graph optimisations.
//
// Each round runs every model -runs times on vrun, then -runs times on
// onnxruntime (after warm-up), and takes each side's median; the table
// shows the smallest median over the rounds (on a shared machine the
// least disturbed round), so run it on a quiet machine or read the ratio,
// not the times. The outputs of both are compared (max |Δ| relative to the
// output's largest magnitude).
//
// onnxruntime-node is looked up in $VRUN_ORT_NODE_MODULES or .ort/node_modules
// at the repository root (npm install --ignore-scripts --prefix .ort
// onnxruntime-node, as test.sh does). Without node or onnxruntime-node the
// command prints why and exits 0, so that CI can run it as a report.
package main

import (
	"bufio"
	"context"
	_ "embed"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/vrun-go/vrun"
	"github.com/vrun-go/vrun/export"
	"github.com/vrun-go/vrun/internal/repo"
	"github.com/vrun-go/vrun/model"
	"github.com/vrun-go/vrun/npy"
	"github.com/vrun-go/vrun/rt"
)

// profileTop is the -top flag.
var profileTop *int

//go:embed ort_bench.js
var script []byte

type benchModel struct {
	name   string
	onnx   string // the ONNX file onnxruntime loads
	graph  *model.Model
	inputs map[string]*rt.Tensor
}

func main() {
	threads := flag.Int("threads", 2, "threads for both vrun (GOMAXPROCS) and onnxruntime (intra-op)")
	runs := flag.Int("runs", 30, "timed runs per model, side and round")
	rounds := flag.Int("rounds", 3, "rounds; the table shows each side's smallest median")
	short := flag.Bool("short", false, "a quick report (CI): -runs 10 -rounds 1 unless given")
	only := flag.String("models", "", "comma-separated model names to run (default: all)")
	profileTop = flag.Int("top", 10, "with -profile, the `number` of nodes listed")
	profile := flag.Int("profile", 0, "after the table, profile each model's vrun run over `N` runs: per-node median times")
	flag.Parse()
	if *short {
		set := map[string]bool{}
		flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
		if !set["runs"] {
			*runs = 10
		}
		if !set["rounds"] {
			*rounds = 1
		}
	}
	if err := run(*threads, *runs, *rounds, *profile, *only, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "bench/ort:", err)
		os.Exit(1)
	}
}

// nodeModules finds onnxruntime-node, or returns why it cannot.
func nodeModules() (string, string) {
	if _, err := exec.LookPath("node"); err != nil {
		return "", "no node in PATH"
	}
	var dirs []string
	if d := os.Getenv("VRUN_ORT_NODE_MODULES"); d != "" {
		dirs = append(dirs, d)
	}
	if d, err := repo.Path(".ort/node_modules"); err == nil {
		dirs = append(dirs, d)
	}
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "onnxruntime-node", "package.json")); err == nil {
			return d, ""
		}
	}
	return "", "onnxruntime-node is not installed (npm install --ignore-scripts --prefix .ort onnxruntime-node)"
}

func run(threads, runs, rounds, profile int, only string, extra []string) error {
	nm, why := nodeModules()
	if nm == "" {
		fmt.Printf("bench/ort: skipped: %s\n", why)
		return nil
	}
	runtime.GOMAXPROCS(threads)
	tmp, err := os.MkdirTemp("", "vrun-bench-ort")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	models, err := findModels(tmp, only, extra)
	if err != nil {
		return err
	}
	js := filepath.Join(tmp, "ort_bench.js")
	if err := os.WriteFile(js, script, 0o644); err != nil {
		return err
	}
	ort, err := startORT(js, nm)
	if err != nil {
		return err
	}
	defer ort.close()

	type result struct {
		vrun, ort []float64 // median per round, ms
		diff      float64
		err       string
		sess      *vrun.Model
		id        int
	}
	res := make([]*result, len(models))
	ver := ""
	for i, m := range models {
		r := &result{}
		res[i] = r
		shapes := map[string][]int{}
		for name, t := range m.inputs {
			shapes[name] = t.Shape
		}
		s, err := vrun.New(m.graph, vrun.Options{Device: "cpu", Shapes: shapes})
		if err != nil {
			r.err = "vrun: " + firstLine(err)
			continue
		}
		r.sess = s
		got, err := s.Run(context.Background(), m.inputs)
		if err != nil {
			r.err = "vrun: " + firstLine(err)
			continue
		}
		id, outs, v, err := ort.load(m.onnx, threads, m.inputs)
		if err != nil {
			r.err = "onnxruntime: " + firstLine(err)
			continue
		}
		ver, r.id = v, id
		r.diff = maxDiff(got, outs)
	}
	defer func() {
		for _, r := range res {
			if r.sess != nil {
				r.sess.Close()
			}
		}
	}()
	ctx := context.Background()
	for round := 0; round < rounds; round++ {
		for i, m := range models {
			r := res[i]
			if r.err != "" {
				continue
			}
			ms, err := timeVrun(ctx, r.sess, m.inputs, runs)
			if err != nil {
				r.err = "vrun: " + firstLine(err)
				continue
			}
			r.vrun = append(r.vrun, median(ms))
			if ms, err = ort.bench(r.id, runs); err != nil {
				r.err = "onnxruntime: " + firstLine(err)
				continue
			}
			r.ort = append(r.ort, median(ms))
		}
	}

	load := ""
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		load = strings.Join(strings.Fields(string(b))[:3], " ")
	}
	fmt.Printf("vrun cpu vs onnxruntime-node %s, %d threads each, median of %d runs, best of %d rounds (load average %s)\n",
		ver, threads, runs, rounds, load)
	fmt.Printf("%-16s %12s %12s %10s %10s\n", "model", "vrun ms", "ort ms", "vrun/ort", "max|Δ|")
	for i, m := range models {
		r := res[i]
		if r.err != "" {
			fmt.Printf("%-16s %s\n", m.name, r.err)
			continue
		}
		v, o := minOf(r.vrun), minOf(r.ort)
		fmt.Printf("%-16s %12.3f %12.3f %10.2f %10.2g\n", m.name, v, o, v/o, r.diff)
	}
	if profile > 0 {
		for _, m := range models {
			if err := profileModel(ctx, m, profile); err != nil {
				fmt.Printf("%s: profile: %v\n", m.name, firstLine(err))
			}
		}
	}
	return nil
}

// profileModel runs m n times with per-node times and prints the nodes
// with the largest median, which a single run's profile (vrun -profile)
// cannot give on a shared machine.
func profileModel(ctx context.Context, m *benchModel, n int) error {
	shapes := map[string][]int{}
	for name, t := range m.inputs {
		shapes[name] = t.Shape
	}
	s, err := vrun.New(m.graph, vrun.Options{Device: "cpu", Shapes: shapes, Profile: true})
	if err != nil {
		return err
	}
	defer s.Close()
	times := map[string][]float64{}
	ops := map[string]string{}
	for i := 0; i < n+3; i++ {
		if _, err := s.Run(ctx, m.inputs); err != nil {
			return err
		}
		if i < 3 {
			continue
		}
		for _, p := range s.Profile() {
			times[p.Node] = append(times[p.Node], float64(p.Time)/1e6)
			ops[p.Node] = p.Op
		}
	}
	type row struct {
		node string
		med  float64
	}
	var rows []row
	total := 0.0
	for node, ts := range times {
		rows = append(rows, row{node, median(ts)})
		total += median(ts)
	}
	sort.Slice(rows, func(a, b int) bool { return rows[a].med > rows[b].med })
	fmt.Printf("\n%s: %d nodes, sum of per-node medians %.3f ms over %d runs\n", m.name, len(rows), total, n)
	for _, r := range rows[:min(*profileTop, len(rows))] {
		fmt.Printf("  %9.4f ms %5.1f%%  %-14s %s\n", r.med, 100*r.med/total, ops[r.node], r.node)
	}
	byOp := map[string]float64{}
	for _, r := range rows {
		byOp[ops[r.node]] += r.med
	}
	opNames := make([]string, 0, len(byOp))
	for op := range byOp {
		opNames = append(opNames, op)
	}
	sort.Slice(opNames, func(a, b int) bool { return byOp[opNames[a]] > byOp[opNames[b]] })
	fmt.Printf("  by op:")
	for _, op := range opNames {
		fmt.Printf(" %s %.1f%%", op, 100*byOp[op]/total)
	}
	fmt.Println()
	return nil
}

func firstLine(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}

// findModels lists the benchmark models, exporting model.bin files to
// ONNX in tmp.
func findModels(tmp, only string, extra []string) ([]*benchModel, error) {
	want := map[string]bool{}
	for _, n := range strings.Split(only, ",") {
		if n != "" {
			want[n] = true
		}
	}
	keep := func(name string) bool { return len(want) == 0 || want[name] }
	var out []*benchModel
	dir, err := repo.Path("testdata/models")
	if err != nil {
		return nil, err
	}
	onnxFiles, _ := filepath.Glob(filepath.Join(dir, "*.onnx"))
	sort.Strings(onnxFiles)
	for _, p := range onnxFiles {
		name := strings.TrimSuffix(filepath.Base(p), ".onnx")
		if !keep(name) {
			continue
		}
		m, err := loadModel(name, p, p, filepath.Join(dir, name+".x.npy"))
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	e2e, err := repo.Path("testdata/e2e")
	if err != nil {
		return nil, err
	}
	bins, _ := filepath.Glob(filepath.Join(e2e, "*.bin"))
	sort.Strings(bins)
	for _, p := range bins {
		name := strings.TrimSuffix(filepath.Base(p), ".bin")
		if !keep("e2e_" + name) {
			continue
		}
		g, err := vrun.LoadGraph(p)
		if err != nil {
			return nil, err
		}
		op := filepath.Join(tmp, name+".onnx")
		if err := export.ONNX(op, g); err != nil {
			g.Close()
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		g.Close()
		m, err := loadModel("e2e_"+name, p, op, filepath.Join(e2e, name, "x.npy"))
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	for _, p := range extra {
		name := strings.TrimSuffix(filepath.Base(p), filepath.Ext(p))
		m, err := loadModel(name, p, p, "")
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

// loadModel reads the graph vrun runs (path) and its input: x.npy for the
// first input when given, deterministic random values otherwise.
func loadModel(name, path, onnxPath, xnpy string) (*benchModel, error) {
	g, err := vrun.LoadGraph(path)
	if err != nil {
		return nil, err
	}
	m := &benchModel{name: name, onnx: onnxPath, graph: g, inputs: map[string]*rt.Tensor{}}
	rng := rand.New(rand.NewPCG(1, 2))
	for k, i := range g.Inputs() {
		mt := g.Tensors[i]
		if k == 0 && xnpy != "" {
			t, err := npy.ReadFile(xnpy)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			m.inputs[mt.Name] = t
			continue
		}
		shape := make([]int, len(mt.Shape))
		for d, v := range mt.Shape {
			shape[d] = max(int(v), 1)
		}
		t, err := rt.NewTensor(mt.DType, shape...)
		if err != nil {
			return nil, err
		}
		for j := 0; j < t.Len(); j++ {
			if mt.DType.IsFloat() {
				t.SetFloat64(j, rng.Float64()*2-1)
			} else {
				t.SetFloat64(j, float64(rng.IntN(2)))
			}
		}
		m.inputs[mt.Name] = t
	}
	return m, nil
}

func timeVrun(ctx context.Context, s *vrun.Model, in map[string]*rt.Tensor, runs int) ([]float64, error) {
	for i := 0; i < 3; i++ {
		if _, err := s.Run(ctx, in); err != nil {
			return nil, err
		}
	}
	ms := make([]float64, runs)
	for i := range ms {
		t0 := time.Now()
		if _, err := s.Run(ctx, in); err != nil {
			return nil, err
		}
		ms[i] = float64(time.Since(t0)) / 1e6
	}
	return ms, nil
}

func median(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s) == 0 {
		return math.NaN()
	}
	return s[len(s)/2]
}

func minOf(v []float64) float64 {
	m := math.Inf(1)
	for _, x := range v {
		m = min(m, x)
	}
	return m
}

// maxDiff is the largest |vrun - ort| over every output, relative to the
// largest |ort| of that output.
func maxDiff(got map[string]*rt.Tensor, want map[string]*rt.Tensor) float64 {
	worst := 0.0
	for name, w := range want {
		g := got[name]
		if g == nil || g.Len() != w.Len() {
			return math.Inf(1)
		}
		scale, d := 0.0, 0.0
		for i := 0; i < w.Len(); i++ {
			scale = max(scale, math.Abs(w.Float64(i)))
			d = max(d, math.Abs(g.Float64(i)-w.Float64(i)))
		}
		if scale > 0 {
			d /= scale
		}
		worst = max(worst, d)
	}
	return worst
}

// ---- the onnxruntime-node process ----

type ortProc struct {
	cmd *exec.Cmd
	w   io.WriteCloser
	in  *json.Encoder
	out *bufio.Scanner
}

func startORT(js, nodeModules string) (*ortProc, error) {
	cmd := exec.Command("node", js)
	cmd.Env = append(os.Environ(), "NODE_PATH="+nodeModules)
	cmd.Stderr = os.Stderr
	w, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	r, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<30)
	return &ortProc{cmd: cmd, w: w, in: json.NewEncoder(w), out: sc}, nil
}

func (p *ortProc) close() {
	p.w.Close()
	p.cmd.Wait()
}

type wireTensor struct {
	DType string `json:"dtype"`
	Dims  []int  `json:"dims"`
	Data  string `json:"data"`
}

var ortTypes = map[rt.DType]string{rt.F32: "float32", rt.F64: "float64", rt.I32: "int32", rt.I64: "int64",
	rt.U8: "uint8", rt.I8: "int8", rt.Bool: "bool", rt.F16: "float16"}

func (p *ortProc) call(req any, resp any) error {
	if err := p.in.Encode(req); err != nil {
		return err
	}
	if !p.out.Scan() {
		if err := p.out.Err(); err != nil {
			return err
		}
		return fmt.Errorf("onnxruntime-node exited")
	}
	var e struct {
		Error string `json:"error"`
	}
	if err := json.Unmarshal(p.out.Bytes(), &e); err == nil && e.Error != "" {
		return fmt.Errorf("%s", e.Error)
	}
	return json.Unmarshal(p.out.Bytes(), resp)
}

func (p *ortProc) load(path string, threads int, in map[string]*rt.Tensor) (int, map[string]*rt.Tensor, string, error) {
	inputs := map[string]wireTensor{}
	for name, t := range in {
		dt, ok := ortTypes[t.DType]
		if !ok {
			return 0, nil, "", fmt.Errorf("input %s: dtype %s", name, t.DType)
		}
		inputs[name] = wireTensor{dt, t.Shape, base64.StdEncoding.EncodeToString(t.Data)}
	}
	var resp struct {
		ID      int                   `json:"id"`
		Outputs map[string]wireTensor `json:"outputs"`
		Version string                `json:"version"`
	}
	if err := p.call(map[string]any{"cmd": "load", "model": path, "threads": threads, "inputs": inputs}, &resp); err != nil {
		return 0, nil, "", err
	}
	outs := map[string]*rt.Tensor{}
	for name, w := range resp.Outputs {
		dt := rt.InvalidDType
		for k, v := range ortTypes {
			if v == w.DType {
				dt = k
			}
		}
		b, err := base64.StdEncoding.DecodeString(w.Data)
		if err != nil || dt == rt.InvalidDType {
			return 0, nil, "", fmt.Errorf("output %s: bad tensor from onnxruntime", name)
		}
		outs[name] = &rt.Tensor{DType: dt, Shape: w.Dims, Data: b}
	}
	return resp.ID, outs, resp.Version, nil
}

func (p *ortProc) bench(id, runs int) ([]float64, error) {
	// Warm up as vrun does.
	var warm struct {
		MS []float64 `json:"ms"`
	}
	if err := p.call(map[string]any{"cmd": "bench", "id": id, "runs": 3}, &warm); err != nil {
		return nil, err
	}
	var resp struct {
		MS []float64 `json:"ms"`
	}
	if err := p.call(map[string]any{"cmd": "bench", "id": id, "runs": runs}, &resp); err != nil {
		return nil, err
	}
	return resp.MS, nil
}
