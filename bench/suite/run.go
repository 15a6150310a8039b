package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/vrun-go/vrun/bench/internal/ortpeer"
	"github.com/vrun-go/vrun/rt"
)

// commit is set with -ldflags "-X main.commit=$(git rev-parse --short HEAD)";
// without it the build's vcs.revision is used.
var commit string

func buildCommit() string {
	if commit != "" {
		return commit
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	rev, dirty := "", false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		// go run stamps no revision; ask git where there is one.
		if out, err := exec.Command("git", "describe", "--always", "--abbrev=12", "--dirty=+dirty").Output(); err == nil {
			return strings.TrimSpace(string(out))
		}
		return "unknown"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if dirty {
		rev += "+dirty"
	}
	return rev
}

// vrunEnv returns the VRUN_* variables of the environment, sorted.
func vrunEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "VRUN_") {
			out = append(out, kv)
		}
	}
	sort.Strings(out)
	return out
}

func machine() Machine {
	m := Machine{OS: runtime.GOOS, Arch: runtime.GOARCH, CPUs: runtime.NumCPU(), Go: runtime.Version()}
	m.Host, _ = os.Hostname()
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	m.LoadAvg = loadAvg()
	return m
}

func loadAvg() string {
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(b)); len(f) >= 3 {
			return strings.Join(f[:3], " ")
		}
	}
	return ""
}

type runOpts struct {
	out, backends, models, baselines, section string
	batches                                   []int
	threads                                   int
	quick                                     bool
	kernelTime, modelTime                     time.Duration
	kinds                                     map[string]bool
}

func runCmd(args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("suite run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o runOpts
	fs.StringVar(&o.out, "out", "", "write the results `file` (JSON)")
	fs.StringVar(&o.backends, "backends", "", "comma-separated `devices` (cpu, vulkan:0, cuda:0, opencl:1, ...); default every device found")
	fs.StringVar(&o.models, "models", "", "comma-separated model files and `dirs` (*.onnx, *.bin; NAME.x.npy beside each is its input), or repo for the repository's testdata models (the default)")
	fs.StringVar(&o.baselines, "baselines", "numpy,pytorch,onnxruntime", "comma-separated `baselines` to run beside vrun, or none")
	fs.StringVar(&o.section, "section", "", "the `name` of this run's section in docs/benchmarks.md (default cpu-HOST, or gpu-HOST where a GPU ran)")
	bs := fs.String("batches", "32", "extra `batches` for models on GPUs (where the batch dim is dynamic), comma-separated; \"\" for none")
	fs.IntVar(&o.threads, "threads", runtime.NumCPU(), "threads of vrun's CPU backend (GOMAXPROCS), NumPy, PyTorch on the CPU and onnxruntime")
	fs.BoolVar(&o.quick, "quick", false, "small cases, few runs (seconds; a smoke test, not a measurement)")
	fs.DurationVar(&o.kernelTime, "kernel-time", 300*time.Millisecond, "least time per kernel case")
	fs.DurationVar(&o.modelTime, "model-time", time.Second, "least time per model and batch")
	kinds := fs.String("kinds", strings.Join(Kinds, ","), "comma-separated `kinds` to run")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if o.out == "" || fs.NArg() > 0 {
		return fmt.Errorf("usage: suite run -out FILE [flags]")
	}
	for _, s := range strings.Split(*bs, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 4096 {
			return fmt.Errorf("-batches: bad batch %q", s)
		}
		o.batches = append(o.batches, n)
	}
	if o.threads < 1 {
		return fmt.Errorf("-threads %d: want at least 1", o.threads)
	}
	o.kinds = map[string]bool{}
	for _, k := range strings.Split(*kinds, ",") {
		if !knownKind(k) {
			return fmt.Errorf("-kinds: unknown kind %q (want %s)", k, strings.Join(Kinds, ", "))
		}
		o.kinds[k] = true
	}
	f, err := run(o, func(format string, a ...any) { fmt.Fprintf(stderr, "suite: "+format+"\n", a...) })
	if err != nil {
		return err
	}
	return f.WriteFile(o.out)
}

// deviceList resolves -backends into the devices to run on.
func deviceList(spec string) []Device {
	var out []Device
	if spec == "" {
		for _, l := range rt.ListDevices() {
			if l.Err != nil {
				out = append(out, Device{Spec: l.Backend, Skipped: firstLine(l.Err)})
				continue
			}
			for _, d := range l.Devices {
				if !d.Logical || d.Index == d.Physical {
					out = append(out, describe(d))
				}
			}
		}
		return out
	}
	for _, s := range strings.Split(spec, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, Device{Spec: s})
		}
	}
	return out
}

func describe(d rt.DeviceInfo) Device {
	class := ClassGPU
	if d.Kind == rt.KindCPU {
		class = ClassCPU
	}
	return Device{Spec: d.Spec(), Name: d.Name, Kind: d.Kind.String(), Class: class, Driver: d.Driver}
}

func run(o runOpts, logf func(string, ...any)) (*File, error) {
	runtime.GOMAXPROCS(o.threads)
	f := &File{Schema: SchemaVersion, Date: time.Now().UTC().Format(time.RFC3339), Commit: buildCommit(),
		Quick: o.quick, Threads: o.threads, Env: vrunEnv(), Machine: machine(), Section: o.section}
	tmp, err := os.MkdirTemp("", "vrun-suite")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	ktm := timing{minTime: o.kernelTime, minRuns: 5, maxRuns: 1000}
	mtm := timing{minTime: o.modelTime, minRuns: 10, maxRuns: 200}
	if o.quick {
		ktm = timing{minTime: 20 * time.Millisecond, minRuns: 3, maxRuns: 50}
		mtm = timing{minTime: 20 * time.Millisecond, minRuns: 3, maxRuns: 20}
	}
	var models []*ortModelSet
	if o.kinds["model"] {
		ms, err := loadModels(o.models, tmp, o.quick)
		if err != nil {
			return nil, err
		}
		for _, m := range ms {
			defer m.Close()
			models = append(models, &ortModelSet{m: m})
		}
	}
	want := map[string]bool{}
	for _, b := range strings.Split(o.baselines, ",") {
		if b = strings.TrimSpace(b); b != "" && b != "none" {
			want[b] = true
		}
	}
	// onnxruntime runs each model right after the CPU backend has, or
	// after every device when there is no CPU backend in the list.
	var ort *ortRunner
	ortDone := false
	if want["onnxruntime"] && len(models) > 0 {
		ort = startORT(o.threads, mtm, logf)
		defer ort.done()
	}
	anyClass := map[string]bool{}
	sectionFor := func() string {
		if f.Section != "" {
			return f.Section
		}
		host := sanitizeSection(f.Machine.Host)
		if anyClass[ClassGPU] {
			return "gpu-" + host
		}
		return "cpu-" + host
	}
	// save writes what has run so far, so that a run cut short (a time
	// limit on the GPU machine) leaves its results.
	save := func() {
		if o.out == "" {
			return
		}
		g := *f
		g.Section = sectionFor()
		g.Machine.LoadAvg = loadAvg()
		if err := g.WriteFile(o.out); err != nil {
			logf("saving %s: %v", o.out, err)
		}
	}
	// baseline runs one baseline on the cases of class, once.
	ran := map[string]bool{}
	baseline := func(name, class string) {
		if ran[name+"/"+class] || !anyClass[class] {
			return
		}
		ran[name+"/"+class] = true
		if !want[name] {
			f.Baselines = append(f.Baselines, Baseline{Name: name, Class: class, Skipped: "not asked for (-baselines)"})
			return
		}
		cs := casesFor(class, false, o.quick)
		filterKinds(&cs, o.kinds)
		var pm []pyModel
		var om []*ortModel
		for _, ms := range models {
			for _, batch := range batchesFor(ms.m, class, o.batches) {
				in, err := batchInputs(ms.m, batch)
				if err != nil {
					continue
				}
				x := in[ms.m.Graph.Tensors[ms.m.Graph.Inputs()[0]].Name]
				pm = append(pm, pyModel{Name: ms.m.Name, Batch: batch, Shape: x.Shape, DType: torchDType(x.DType)})
				if class == ClassCPU {
					om = append(om, &ortModel{Model: ms.m, batch: batch, probeMS: ms.ms[class]})
				}
			}
		}
		var b Baseline
		var res []Result
		switch name {
		case "numpy":
			b, res = runPython("numpy", "numpy", "bench/numpy_baseline.py", []string{"-suite"}, openblasEnv(o.threads),
				specOf("cpu", o.threads, cs, nil, ktm), class, tmp, logf)
		case "pytorch":
			dev := "cpu"
			if class == ClassGPU {
				dev = "cuda"
			}
			spec := specOf(dev, o.threads, cs, pm, ktm)
			spec.MinTime = max(ktm.minTime, mtm.minTime).Seconds()
			b, res = runPython("pytorch", "torch", "bench/torch_baseline.py", []string{"suite"}, nil, spec, class, tmp, logf)
		case "onnxruntime":
			if ort == nil {
				return
			}
			if !ortDone {
				for _, m := range om {
					ort.time(m.Model, m.batch, m.probeMS)
				}
			}
			b, res = ort.done()
		}
		if b.Skipped != "" {
			logf("baseline %s (%s): skipped: %s", name, class, b.Skipped)
		}
		f.Baselines = append(f.Baselines, b)
		f.Results = append(f.Results, res...)
		save()
	}
	for _, d := range deviceList(o.backends) {
		if d.Skipped != "" {
			logf("%s: skipped: %s", d.Spec, d.Skipped)
			f.Devices = append(f.Devices, d)
			continue
		}
		dev, err := rt.Open(d.Spec, nil)
		if err != nil {
			d.Skipped = firstLine(err)
			logf("%s: skipped: %s", d.Spec, d.Skipped)
			f.Devices = append(f.Devices, d)
			continue
		}
		d = describe(dev.Info())
		soft := d.Class == ClassCPU && d.Spec != "cpu:0" && !strings.HasPrefix(d.Spec, "cpu")
		logf("%s: %s (%s)", d.Spec, d.Name, d.Kind)
		f.Devices = append(f.Devices, d)
		anyClass[d.Class] = true
		cs := casesFor(d.Class, soft, o.quick)
		filterKinds(&cs, o.kinds)
		f.Results = append(f.Results, kernelResults(dev, d, cs, ktm, logf)...)
		dev.Close()
		for _, ms := range models {
			for _, batch := range batchesFor(ms.m, d.Class, o.batches) {
				r := Result{Kind: "model", Case: ms.m.Name, Batch: batch, Impl: "vrun", Device: d.Spec, Class: d.Class, Unit: "ms"}
				r.MS, r.Runs, err = timeModel(ms.m, d, batch, mtm)
				if err != nil {
					r.Error = firstLine(err)
					r.MS, r.Runs = 0, 0
				}
				logf("%s model %s batch %d: %.4g ms %s", d.Spec, ms.m.Name, batch, r.MS, r.Error)
				f.Results = append(f.Results, r)
				ms.note(d.Class, batch, r.MS)
				if ort != nil && !ortDone && strings.HasPrefix(d.Spec, "cpu") && batch == nativeBatch(ms.m) {
					ort.time(ms.m, batch, r.MS)
				}
			}
		}
		if ort != nil && strings.HasPrefix(d.Spec, "cpu") {
			ortDone = true
		}
		save()
		if strings.HasPrefix(d.Spec, "cpu") {
			// The CPU's baselines right after the CPU backend, so that
			// both sides see about the same load on a shared machine.
			baseline("onnxruntime", ClassCPU)
			baseline("numpy", ClassCPU)
			baseline("pytorch", ClassCPU)
		}
	}
	f.Section = sectionFor()
	// PyTorch on the GPU first: the baseline a GPU run is for, should the
	// run be cut short. (The CPU baselines ran right after the CPU
	// backend, when it was in the list.)
	for _, bc := range []struct{ name, class string }{
		{"pytorch", ClassGPU}, {"onnxruntime", ClassCPU}, {"numpy", ClassCPU}, {"pytorch", ClassCPU},
	} {
		baseline(bc.name, bc.class)
	}
	f.Machine.LoadAvg = loadAvg()
	return f, f.Validate()
}

// ortModelSet is a model and vrun's time of it per class (for sizing
// onnxruntime's runs).
type ortModelSet struct {
	m  *ortpeer.Model
	ms map[string]float64
}

func (s *ortModelSet) note(class string, batch int, ms float64) {
	if s.ms == nil {
		s.ms = map[string]float64{}
	}
	if batch == nativeBatch(s.m) && ms > 0 {
		s.ms[class] = ms
	}
}

func filterKinds(cs *caseSet, kinds map[string]bool) {
	if !kinds["gemm"] {
		cs.gemm = nil
	}
	if !kinds["gemv"] {
		cs.gemv = nil
	}
	if !kinds["conv"] {
		cs.conv = nil
	}
}

func torchDType(d rt.DType) string {
	switch d {
	case rt.I64:
		return "int64"
	case rt.I32:
		return "int32"
	}
	return "float32"
}

func sanitizeSection(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.' {
			b.WriteRune(r)
		}
		if b.Len() >= 40 {
			break
		}
	}
	if b.Len() == 0 {
		return "host"
	}
	return b.String()
}
