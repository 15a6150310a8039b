// Package onnxrt checks exported ONNX files with the reference tools,
// for tests: the ONNX checker of Debian's python3-onnx, and onnxruntime
// through onnxruntime-node (npm). Each helper skips the test when its tool
// is not installed; test.sh installs both when it can.
package onnxrt

import (
	"bytes"
	_ "embed"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/vrun-go/vrun/rt"
)

//go:embed ort_run.js
var runScript []byte

// Python returns a python3 that has the onnx package (Debian's
// /usr/bin/python3 first), or skips the test.
func Python(t testing.TB) string {
	t.Helper()
	var why string
	for _, py := range []string{"/usr/bin/python3", "python3"} {
		out, err := exec.Command(py, "-c", "import onnx, onnx.checker").CombinedOutput()
		if err == nil {
			return py
		}
		why = fmt.Sprintf("%v %s", err, bytes.TrimSpace(out))
	}
	t.Skipf("no python3 with the onnx package (apt-get install python3-onnx): %s", why)
	return ""
}

// Check runs onnx.checker.check_model with full_check (type and shape
// inference) on each file and checks the opset and IR version. It
// returns the checker's report.
func Check(t testing.TB, opset, irVersion int, paths ...string) string {
	t.Helper()
	py := Python(t)
	script := fmt.Sprintf(`
import sys, onnx
for p in sys.argv[1:]:
    m = onnx.load(p)
    onnx.checker.check_model(m, full_check=True)
    ops = {o.domain: o.version for o in m.opset_import}
    assert ops == {'': %d} and m.ir_version == %d, (p, ops, m.ir_version)
    print('onnx', onnx.__version__, 'checker ok:', p.rsplit('/', 1)[-1])
`, opset, irVersion)
	out, err := exec.Command(py, append([]string{"-c", script}, paths...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("onnx checker: %v\n%s", err, out)
	}
	return string(bytes.TrimSpace(out))
}

// CheckEach is Check reporting each file on its own: it returns the
// checker's error for every file that fails, by path.
func CheckEach(t testing.TB, opset, irVersion int, paths ...string) map[string]string {
	t.Helper()
	py := Python(t)
	script := fmt.Sprintf(`
import sys, json, onnx
res = {}
for p in sys.argv[1:]:
    try:
        m = onnx.load(p)
        onnx.checker.check_model(m, full_check=True)
        ops = {o.domain: o.version for o in m.opset_import}
        assert ops == {'': %d} and m.ir_version == %d, (ops, m.ir_version)
    except Exception as e:
        res[p] = (type(e).__name__ + ': ' + str(e)).strip()
print(json.dumps(res))
`, opset, irVersion)
	out, err := exec.Command(py, append([]string{"-c", script}, paths...)...).Output()
	if err != nil {
		t.Fatalf("onnx checker: %v", err)
	}
	var res map[string]string
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("onnx checker output: %v: %s", err, out)
	}
	return res
}

// NodeModules returns the node_modules folder that holds
// onnxruntime-node ($VRUN_ORT_NODE_MODULES, or .ort/node_modules at the
// repository root, where test.sh installs it), or skips the test.
func NodeModules(t testing.TB) string {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("no node: cannot run onnxruntime-node")
	}
	dirs := []string{os.Getenv("VRUN_ORT_NODE_MODULES")}
	if wd, err := os.Getwd(); err == nil {
		for d := wd; ; d = filepath.Dir(d) {
			if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
				dirs = append(dirs, filepath.Join(d, ".ort", "node_modules"))
				break
			}
			if filepath.Dir(d) == d {
				break
			}
		}
	}
	for _, d := range dirs {
		if d == "" {
			continue
		}
		if _, err := os.Stat(filepath.Join(d, "onnxruntime-node", "package.json")); err == nil {
			return d
		}
	}
	t.Skip("onnxruntime-node is not installed (npm install --ignore-scripts --prefix .ort onnxruntime-node, as test.sh does)")
	return ""
}

var ortTypes = map[rt.DType]string{rt.F32: "float32", rt.F64: "float64", rt.F16: "float16", rt.I32: "int32",
	rt.I64: "int64", rt.U8: "uint8", rt.I8: "int8", rt.Bool: "bool"}

type wireTensor struct {
	DType string `json:"dtype"`
	Dims  []int  `json:"dims"`
	Data  string `json:"data"`
}

// Request is one model run for RunBatch.
type Request struct {
	Path   string
	Inputs map[string]*rt.Tensor
}

// Result is the outcome of one Request: its outputs, or onnxruntime's
// error.
type Result struct {
	Outputs map[string]*rt.Tensor
	Err     string
}

type wireRequest struct {
	Model  string                `json:"model"`
	Inputs map[string]wireTensor `json:"inputs"`
}

type wireResult struct {
	Outputs map[string]wireTensor `json:"outputs"`
	Error   string                `json:"error"`
}

func toWire(t testing.TB, r Request) wireRequest {
	abs, err := filepath.Abs(r.Path)
	if err != nil {
		t.Fatal(err)
	}
	w := wireRequest{Model: abs, Inputs: map[string]wireTensor{}}
	for name, x := range r.Inputs {
		w.Inputs[name] = wireTensor{DType: ortTypes[x.DType], Dims: x.Shape, Data: base64.StdEncoding.EncodeToString(x.Data)}
	}
	return w
}

func fromWire(t testing.TB, res map[string]wireTensor) map[string]*rt.Tensor {
	out := map[string]*rt.Tensor{}
	for name, o := range res {
		var dt rt.DType
		for d, s := range ortTypes {
			if s == o.DType {
				dt = d
			}
		}
		data, err := base64.StdEncoding.DecodeString(o.Data)
		if err != nil || dt == rt.InvalidDType {
			t.Fatalf("onnxruntime output %q: type %q: %v", name, o.DType, err)
		}
		out[name] = &rt.Tensor{DType: dt, Shape: o.Dims, Data: data}
	}
	return out
}

// node runs the script on a request file and returns its stdout.
func node(t testing.TB, req any) []byte {
	t.Helper()
	nm := NodeModules(t)
	dir := t.TempDir()
	script := filepath.Join(dir, "ort_run.js")
	if err := os.WriteFile(script, runScript, 0o644); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(req)
	rp := filepath.Join(dir, "request.json")
	if err := os.WriteFile(rp, b, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("node", script, rp)
	cmd.Env = append(os.Environ(), "NODE_PATH="+nm)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("onnxruntime: %v\n%s", err, stderr.Bytes())
	}
	return out
}

// Run runs the ONNX file at path in onnxruntime (CPU execution provider,
// graph optimisations off) on inputs and returns its outputs.
func Run(t testing.TB, path string, inputs map[string]*rt.Tensor) map[string]*rt.Tensor {
	t.Helper()
	var res map[string]wireTensor
	if err := json.Unmarshal(node(t, toWire(t, Request{path, inputs})), &res); err != nil {
		t.Fatalf("onnxruntime output: %v", err)
	}
	return fromWire(t, res)
}

// RunBatch runs many models in one onnxruntime process.
func RunBatch(t testing.TB, reqs []Request) []Result {
	t.Helper()
	w := make([]wireRequest, len(reqs))
	for i, r := range reqs {
		w[i] = toWire(t, r)
	}
	var res []wireResult
	if err := json.Unmarshal(node(t, w), &res); err != nil || len(res) != len(reqs) {
		t.Fatalf("onnxruntime output: %v (%d results for %d requests)", err, len(res), len(reqs))
	}
	out := make([]Result, len(res))
	for i, r := range res {
		if r.Error != "" {
			out[i].Err = r.Error
			continue
		}
		out[i].Outputs = fromWire(t, r.Outputs)
	}
	return out
}
