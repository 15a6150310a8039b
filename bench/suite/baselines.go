package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/vrun-go/vrun/bench/internal/ortpeer"
	"github.com/vrun-go/vrun/internal/repo"
)

// pySpec is what bench/torch_baseline.py suite and bench/numpy_baseline.py
// -suite read: the cases and the timing bounds.
type pySpec struct {
	Device  string    `json:"device"`
	Threads int       `json:"threads"`
	MinTime float64   `json:"min_time"`
	MinRuns int       `json:"min_runs"`
	MaxRuns int       `json:"max_runs"`
	GEMM    []pyCase  `json:"gemm"`
	GEMV    []pyCase  `json:"gemv"`
	Conv    []pyCase  `json:"conv"`
	Models  []pyModel `json:"models"`
}

type pyCase struct {
	Case   string `json:"case"`
	N      int    `json:"n,omitempty"`
	K      int    `json:"k,omitempty"`
	Form   string `json:"form,omitempty"`
	C      int    `json:"c,omitempty"`
	H      int    `json:"h,omitempty"`
	KH     int    `json:"kh,omitempty"`
	S      int    `json:"s,omitempty"`
	P      int    `json:"p"`
	Groups int    `json:"groups,omitempty"`
}

type pyModel struct {
	Name  string `json:"name"`
	Batch int    `json:"batch"`
	Shape []int  `json:"shape"`
	DType string `json:"dtype"`
}

// pyLine is one line a Python baseline prints.
type pyLine struct {
	Skipped string  `json:"skipped"`
	Version string  `json:"version"`
	Device  string  `json:"device"`
	Kind    string  `json:"kind"`
	Case    string  `json:"case"`
	Batch   int     `json:"batch"`
	Impl    string  `json:"impl"`
	MS      float64 `json:"ms"`
	Runs    int     `json:"runs"`
	Error   string  `json:"error"`
}

func specOf(device string, threads int, cs caseSet, models []pyModel, tm timing) pySpec {
	s := pySpec{Device: device, Threads: threads, MinTime: tm.minTime.Seconds(), MinRuns: tm.minRuns, MaxRuns: tm.maxRuns, Models: models}
	for _, c := range cs.gemm {
		s.GEMM = append(s.GEMM, pyCase{Case: c.name(), N: c.N})
	}
	for _, c := range cs.gemv {
		s.GEMV = append(s.GEMV, pyCase{Case: c.name(), K: c.K, N: c.N, Form: c.Form})
	}
	for _, c := range cs.conv {
		s.Conv = append(s.Conv, pyCase{Case: c.Name, N: c.N, C: c.C, H: c.H, K: c.K, KH: c.KH, S: c.S, P: c.P, Groups: c.Groups})
	}
	return s
}

// python finds the interpreter for a baseline: $VRUN_BENCH_PYTHON, or the
// first of /usr/bin/python3 and python3 that imports module.
func python(module string) (string, string) {
	cands := []string{"/usr/bin/python3", "python3"}
	if p := os.Getenv("VRUN_BENCH_PYTHON"); p != "" {
		cands = []string{p}
	}
	for _, c := range cands {
		if _, err := exec.LookPath(c); err != nil {
			continue
		}
		if exec.Command(c, "-c", "import "+module).Run() == nil {
			return c, ""
		}
	}
	return "", fmt.Sprintf("no Python with %s (tried %s; set VRUN_BENCH_PYTHON)", module, strings.Join(cands, ", "))
}

// runPython runs a baseline script on spec and turns its lines into
// results of class class. The baseline's record says what ran, or why
// it was skipped.
func runPython(name, module, script string, args []string, env []string, spec pySpec, class string, tmp string, logf func(string, ...any)) (Baseline, []Result) {
	b := Baseline{Name: name, Class: class}
	py, why := python(module)
	if py == "" {
		b.Skipped = why
		return b, nil
	}
	path, err := repo.Path(script)
	if err != nil {
		b.Skipped = err.Error()
		return b, nil
	}
	sp := filepath.Join(tmp, name+"-"+class+".json")
	js, _ := json.Marshal(spec)
	if err := os.WriteFile(sp, js, 0o644); err != nil {
		b.Skipped = err.Error()
		return b, nil
	}
	cmd := exec.Command(py, append(append([]string{path}, args...), sp)...)
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Skipped = err.Error()
		return b, nil
	}
	if err := cmd.Start(); err != nil {
		b.Skipped = err.Error()
		return b, nil
	}
	var res []Result
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 1<<16), 1<<24)
	for sc.Scan() {
		var l pyLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			continue // not ours: a library's print
		}
		switch {
		case l.Skipped != "":
			b.Skipped = l.Skipped
		case l.Version != "":
			b.Version, b.Device = l.Version, l.Device
		case l.Kind != "":
			r := Result{Kind: l.Kind, Case: l.Case, Batch: l.Batch, Impl: l.Impl, Device: spec.Device, Class: class, Runs: l.Runs, Error: l.Error}
			if l.Error == "" && l.MS > 0 {
				r.MS = l.MS
				if l.Kind != "model" {
					if rate, unit, err := rateOf(l.Kind, l.Case, l.MS); err == nil {
						r.Rate, r.Unit = rate, unit
					}
				}
			} else if r.Error == "" {
				r.Error = "no time"
			}
			logf("%s %s %s %s: %.4g ms %s", r.Impl, spec.Device, r.Kind, r.Case, r.MS, r.Error)
			res = append(res, r)
		}
	}
	if err := cmd.Wait(); err != nil && b.Skipped == "" {
		msg := strings.TrimSpace(stderr.String())
		if i := strings.LastIndex(msg, "\n"); i >= 0 {
			msg = msg[i+1:]
		}
		if len(res) == 0 {
			b.Skipped = fmt.Sprintf("%s failed: %v: %s", script, err, msg)
		} else {
			b.Version += fmt.Sprintf(" (exited early: %v: %s)", err, msg)
		}
	}
	if b.Version == "" && b.Skipped == "" {
		b.Skipped = script + " printed no results"
	}
	return b, res
}

// openblasEnv is compare.py's: Debian's NumPy loads libblas.so.3, which
// may be the reference BLAS; OpenBLAS, where installed, goes first on
// LD_LIBRARY_PATH of that process only, with threads threads.
func openblasEnv(threads int) []string {
	t := strconv.Itoa(threads)
	env := []string{"OPENBLAS_NUM_THREADS=" + t, "OMP_NUM_THREADS=" + t, "OPENBLAS_CORETYPE=", "OPENBLAS_L2_SIZE="}
	const dir = "/usr/lib/x86_64-linux-gnu/openblas-pthread"
	if st, err := os.Stat(dir); err == nil && st.IsDir() {
		env = append(env, "LD_LIBRARY_PATH="+dir+string(os.PathListSeparator)+os.Getenv("LD_LIBRARY_PATH"))
	}
	return env
}

// ortRunner times models on onnxruntime's CPU provider with threads
// intra-op threads. The suite times each model right after vrun's CPU
// backend has, so that both see the same load on a shared machine.
type ortRunner struct {
	b       Baseline
	p       *ortpeer.Peer
	threads int
	tm      timing
	logf    func(string, ...any)
	res     []Result
}

// startORT starts onnxruntime; its baseline record says why not when it
// cannot.
func startORT(threads int, tm timing, logf func(string, ...any)) *ortRunner {
	o := &ortRunner{b: Baseline{Name: "onnxruntime", Class: ClassCPU, Device: fmt.Sprintf("%d threads", threads)},
		threads: threads, tm: tm, logf: logf}
	ortRT, ok, why := ortpeer.Find()
	if !ok {
		o.b.Skipped = why
		return o
	}
	p, err := ortpeer.Start(ortRT)
	if err != nil {
		o.b.Skipped = err.Error()
		return o
	}
	o.p = p
	return o
}

// time times m at its own batch, with about as many runs as vrun's
// probeMS fits in the least time.
func (o *ortRunner) time(m *ortpeer.Model, batch int, probeMS float64) {
	if o.p == nil {
		return
	}
	r := Result{Kind: "model", Case: m.Name, Batch: batch, Impl: "onnxruntime", Device: "cpu", Class: ClassCPU}
	id, _, ver, err := o.p.Load(m.ONNX, o.threads, m.Inputs)
	var ms []float64
	if err == nil {
		o.b.Version = ver
		runs := o.tm.minRuns
		if probeMS > 0 {
			runs = int(o.tm.minTime.Seconds() * 1e3 / probeMS)
		}
		ms, err = o.p.Bench(id, min(max(runs, o.tm.minRuns), o.tm.maxRuns))
	}
	if err != nil {
		r.Error = "onnxruntime: " + firstLine(err)
	} else {
		r.MS, r.Runs = median(ms), len(ms)
	}
	o.logf("onnxruntime %s: %.4g ms %s", m.Name, r.MS, r.Error)
	o.res = append(o.res, r)
}

// done ends onnxruntime and returns its baseline record and results.
func (o *ortRunner) done() (Baseline, []Result) {
	if o.p != nil {
		o.p.Close()
		o.p = nil
	}
	if o.b.Version == "" && o.b.Skipped == "" {
		o.b.Version = "?"
	}
	return o.b, o.res
}

// ortModel is a model with the batch onnxruntime runs and vrun's time
// for it (to size onnxruntime's number of runs).
type ortModel struct {
	*ortpeer.Model
	batch   int
	probeMS float64
}
