// Package ortpeer runs onnxruntime beside vrun for the benchmarks
// (bench/ort, bench/suite): it finds an onnxruntime, starts it as a child
// process that loads and times ONNX models on request, and loads the
// benchmark models with their inputs.
//
// The child is ort_bench.js under node with the npm package
// onnxruntime-node (looked up in $VRUN_ORT_NODE_MODULES or .ort/node_modules
// at the repository root: npm install --ignore-scripts --prefix .ort
// onnxruntime-node, as test.sh does), or, where node or the package is
// missing, ort_bench.py under a Python with the onnxruntime module
// ($VRUN_ORT_PYTHON, python3, /usr/bin/python3: the GPU machine has it).
// Both speak one JSON object per line each way (see ort_bench.js) and
// open sessions the same way: onnxruntime's default graph optimisations,
// the sequential executor, N intra-op threads and one inter-op thread.
package ortpeer

import (
	"bufio"
	_ "embed"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"github.com/vrun-go/vrun/internal/repo"
	"github.com/vrun-go/vrun/rt"
)

//go:embed ort_bench.js
var jsScript []byte

//go:embed ort_bench.py
var pyScript []byte

// Runtime says how to start onnxruntime: under node with onnxruntime-node,
// or under a Python with the onnxruntime module.
type Runtime struct {
	// Node is the node_modules directory holding onnxruntime-node, or "".
	Node string
	// Python is the Python interpreter with onnxruntime when Node is "".
	Python string
}

// String names the runtime for reports.
func (r Runtime) String() string {
	if r.Node != "" {
		return "onnxruntime-node (" + r.Node + ")"
	}
	return "onnxruntime (" + r.Python + ")"
}

// Find looks for onnxruntime-node, then for Python's onnxruntime. When
// neither is there, ok is false and why says what is missing.
func Find() (r Runtime, ok bool, why string) {
	if nm, why1 := NodeModules(); nm != "" {
		return Runtime{Node: nm}, true, ""
	} else if py, why2 := pythonORT(); py != "" {
		return Runtime{Python: py}, true, ""
	} else {
		return Runtime{}, false, why1 + "; " + why2
	}
}

// FindNode is Find without the Python fallback (bench/ort's behaviour).
func FindNode() (r Runtime, ok bool, why string) {
	if nm, why := NodeModules(); nm != "" {
		return Runtime{Node: nm}, true, ""
	} else {
		return Runtime{}, false, why
	}
}

// NodeModules finds onnxruntime-node, or returns why it cannot.
func NodeModules() (dir, why string) {
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

// pythonORT finds a Python that imports onnxruntime.
func pythonORT() (string, string) {
	cands := []string{"python3", "/usr/bin/python3"}
	if p := os.Getenv("VRUN_ORT_PYTHON"); p != "" {
		cands = []string{p}
	}
	for _, c := range cands {
		if _, err := exec.LookPath(c); err != nil {
			continue
		}
		if exec.Command(c, "-c", "import onnxruntime, numpy").Run() == nil {
			return c, ""
		}
	}
	return "", "no Python with onnxruntime (" + strings.Join(cands, ", ") + ")"
}

// Peer is a running onnxruntime child process. It is used by one
// goroutine at a time.
type Peer struct {
	cmd *exec.Cmd
	dir string
	w   io.WriteCloser
	in  *json.Encoder
	out *bufio.Scanner
	// nprof numbers the profiles' file prefixes.
	nprof int
}

// Start starts onnxruntime as r says. The child's stderr goes to ours.
// The caller must Close the peer.
func Start(r Runtime) (*Peer, error) {
	dir, err := os.MkdirTemp("", "vrun-ortpeer")
	if err != nil {
		return nil, fmt.Errorf("ortpeer: %w", err)
	}
	var cmd *exec.Cmd
	if r.Node != "" {
		js := filepath.Join(dir, "ort_bench.js")
		if err := os.WriteFile(js, jsScript, 0o644); err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("ortpeer: %w", err)
		}
		cmd = exec.Command("node", js)
		cmd.Env = append(os.Environ(), "NODE_PATH="+r.Node)
	} else {
		py := filepath.Join(dir, "ort_bench.py")
		if err := os.WriteFile(py, pyScript, 0o644); err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("ortpeer: %w", err)
		}
		cmd = exec.Command(r.Python, py)
	}
	cmd.Stderr = os.Stderr
	w, err := cmd.StdinPipe()
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("ortpeer: %w", err)
	}
	rd, err := cmd.StdoutPipe()
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("ortpeer: %w", err)
	}
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("ortpeer: starting %s: %w", r, err)
	}
	sc := bufio.NewScanner(rd)
	sc.Buffer(make([]byte, 1<<20), 1<<30)
	return &Peer{cmd: cmd, dir: dir, w: w, in: json.NewEncoder(w), out: sc}, nil
}

// Close ends the child process and removes its script.
func (p *Peer) Close() {
	p.w.Close()
	p.cmd.Wait()
	os.RemoveAll(p.dir)
}

type wireTensor struct {
	DType string `json:"dtype"`
	Dims  []int  `json:"dims"`
	Data  string `json:"data"`
}

var ortTypes = map[rt.DType]string{rt.F32: "float32", rt.F64: "float64", rt.I32: "int32", rt.I64: "int64",
	rt.U8: "uint8", rt.I8: "int8", rt.Bool: "bool", rt.F16: "float16"}

func (p *Peer) call(req any, resp any) error {
	if err := p.in.Encode(req); err != nil {
		return err
	}
	if !p.out.Scan() {
		if err := p.out.Err(); err != nil {
			return err
		}
		return fmt.Errorf("onnxruntime exited")
	}
	var e struct {
		Error string `json:"error"`
	}
	if err := json.Unmarshal(p.out.Bytes(), &e); err == nil && e.Error != "" {
		return fmt.Errorf("%s", e.Error)
	}
	return json.Unmarshal(p.out.Bytes(), resp)
}

// wireInputs encodes inputs for the child.
func wireInputs(in map[string]*rt.Tensor) (map[string]wireTensor, error) {
	inputs := map[string]wireTensor{}
	for name, t := range in {
		dt, ok := ortTypes[t.DType]
		if !ok {
			return nil, fmt.Errorf("input %s: dtype %s", name, t.DType)
		}
		inputs[name] = wireTensor{dt, t.Shape, base64.StdEncoding.EncodeToString(t.Data)}
	}
	return inputs, nil
}

// Load opens a session on the ONNX file path with threads intra-op
// threads and runs it once on in. It returns the session's id for Bench,
// its outputs and onnxruntime's version.
func (p *Peer) Load(path string, threads int, in map[string]*rt.Tensor) (id int, outs map[string]*rt.Tensor, version string, err error) {
	inputs, err := wireInputs(in)
	if err != nil {
		return 0, nil, "", err
	}
	var resp struct {
		ID      int                   `json:"id"`
		Outputs map[string]wireTensor `json:"outputs"`
		Version string                `json:"version"`
	}
	if err := p.call(map[string]any{"cmd": "load", "model": path, "threads": threads, "inputs": inputs}, &resp); err != nil {
		return 0, nil, "", err
	}
	outs = map[string]*rt.Tensor{}
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

// Bench runs session id 3 times to warm up, then times runs runs and
// returns each run's wall time in ms.
func (p *Peer) Bench(id, runs int) ([]float64, error) {
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

// NodeTime is one node of onnxruntime's profile of a model.
type NodeTime struct {
	// Node is onnxruntime's node name (after its graph optimisations:
	// "Relu_61_nchwc" for a Conv with a fused ReLU in NCHWc layout).
	Node string
	// Op is the node's op type ("Conv", "MaxPool", "ReorderOutput").
	Op string
	// Shape is the first output's shape, as 1x64x56x56.
	Shape string
	// MS is the median of the node's kernel times over the timed runs.
	MS float64
}

// Profile opens a profiling session on the ONNX file path (threads
// intra-op threads, as Load), runs it on in 3 times to warm up and runs
// times, and returns onnxruntime's per-node median kernel times, largest
// first.
func (p *Peer) Profile(path string, threads int, in map[string]*rt.Tensor, runs int) ([]NodeTime, error) {
	inputs, err := wireInputs(in)
	if err != nil {
		return nil, err
	}
	prefix := filepath.Join(p.dir, fmt.Sprintf("profile%d", p.nprof))
	p.nprof++
	var resp struct {
		File string `json:"file"`
	}
	req := map[string]any{"cmd": "profile", "model": path, "threads": threads, "inputs": inputs, "runs": runs, "prefix": prefix}
	if err := p.call(req, &resp); err != nil {
		return nil, err
	}
	f, err := os.ReadFile(resp.File)
	if err != nil {
		return nil, err
	}
	os.Remove(resp.File)
	return parseProfile(f, 3)
}

// parseProfile reads onnxruntime's profile trace (a JSON array of Chrome
// trace events: one "Node" event NAME_kernel_time per node and run, with
// its time in µs) and returns each node's median time over its runs after
// the first skip, largest first.
func parseProfile(trace []byte, skip int) ([]NodeTime, error) {
	var events []struct {
		Cat  string  `json:"cat"`
		Name string  `json:"name"`
		Dur  float64 `json:"dur"`
		Args struct {
			Op    string             `json:"op_name"`
			Shape []map[string][]int `json:"output_type_shape"`
		} `json:"args"`
	}
	if err := json.Unmarshal(trace, &events); err != nil {
		return nil, fmt.Errorf("onnxruntime profile: %w", err)
	}
	times := map[string][]float64{}
	nodes := map[string]*NodeTime{}
	var order []string
	for _, e := range events {
		name, ok := strings.CutSuffix(e.Name, "_kernel_time")
		if e.Cat != "Node" || !ok {
			continue
		}
		if nodes[name] == nil {
			nt := &NodeTime{Node: name, Op: e.Args.Op}
			if len(e.Args.Shape) > 0 {
				for _, dims := range e.Args.Shape[0] {
					parts := make([]string, len(dims))
					for i, d := range dims {
						parts[i] = fmt.Sprint(d)
					}
					nt.Shape = strings.Join(parts, "x")
				}
			}
			nodes[name] = nt
			order = append(order, name)
		}
		times[name] = append(times[name], e.Dur/1e3)
	}
	out := make([]NodeTime, 0, len(order))
	for _, name := range order {
		ts := times[name]
		if len(ts) > skip {
			ts = ts[skip:]
		}
		nt := *nodes[name]
		nt.MS = Median(ts)
		out = append(out, nt)
	}
	sort.SliceStable(out, func(a, b int) bool { return out[a].MS > out[b].MS })
	return out, nil
}
