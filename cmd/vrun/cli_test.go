package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/vrun-go/vrun/internal/e2e"
	"github.com/vrun-go/vrun/model"
	"github.com/vrun-go/vrun/model/onnx"
	"github.com/vrun-go/vrun/npy"
	"github.com/vrun-go/vrun/rt"
	"github.com/vrun-go/vrun/rt/vulkan"
	"github.com/vrun-go/vrun/train"
)

// TestExitHelper is the vrun process of vrunExit: it runs main with the
// arguments in $VRUN_EXIT_ARGS.
func TestExitHelper(t *testing.T) {
	if os.Getenv("VRUN_EXIT_HELPER") != "1" {
		t.Skip("runs only as vrunExit's process")
	}
	os.Args = append([]string{"vrun"}, strings.Split(os.Getenv("VRUN_EXIT_ARGS"), "\x1f")...)
	main()
	os.Exit(0)
}

// vrunExit runs vrun with args in a process of its own and returns its
// output and exit status.
func vrunExit(t *testing.T, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestExitHelper$")
	cmd.Env = append(os.Environ(), "VRUN_EXIT_HELPER=1", "VRUN_EXIT_ARGS="+strings.Join(args, "\x1f"))
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return string(out), ee.ExitCode()
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(out), 0
}

// hugeModels writes a model.bin whose static input is [2^28, 37] and an
// ONNX model whose input is [2^20, 2^20].
func hugeModels(t *testing.T) (bin, onnxPath string) {
	t.Helper()
	dir := t.TempDir()
	b := model.NewBuilder()
	x := b.Input("x", rt.F32, 1<<28, 37)
	w := b.Weight("w", rt.F32, []int64{37, 23}, make([]float32, 37*23))
	b.Output(b.Op("Softmax", []string{b.Op("MatMul", []string{x, w}, nil)}, nil))
	m, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	bin = filepath.Join(dir, "static.bin")
	if err := model.WriteFile(bin, m); err != nil {
		t.Fatal(err)
	}
	b = model.NewBuilder()
	y := b.Op("Relu", []string{b.Input("x", rt.F32, 1<<20, 1<<20)}, nil)
	b.SetType(y, rt.F32, 1<<20, 1<<20)
	b.Output(y)
	if m, err = b.Build(); err != nil {
		t.Fatal(err)
	}
	onnxPath = filepath.Join(dir, "square.onnx")
	if err := onnx.ExportFile(onnxPath, m, onnx.ExportOptions{}); err != nil {
		t.Fatal(err)
	}
	return bin, onnxPath
}

// Hostile sizes and bad flags give clear errors with exit status 1 (a
// failure) or 2 (usage), never a crash of the Go runtime.
func TestExitStatus(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: starts processes")
	}
	mlp := filepath.Join(e2e.Dir(), "mlp.bin")
	static, square := hugeModels(t)
	for _, tc := range []struct {
		args []string
		code int
		want []string
	}{
		{[]string{"-device", "cpu", static}, 1, []string{`input "x" f32[268435456 37] needs 37.0 GiB, more than the`}},
		{[]string{"info", "-device", "cpu", static}, 1, []string{"needs", "more than the", "nor can it run in chunks of the batch: no input has a dynamic leading dim"}},
		{[]string{"-device", "cpu", "-shape", "x=100000000000x37", mlp}, 1, []string{`input "x" f32[100000000000 37] needs 13.5 TiB, more than the`}},
		{[]string{"info", "-device", "cpu", "-shape", "x=100000000000x37", mlp}, 1, []string{"the plan (arena ", "nor can it run in chunks"}},
		{[]string{"-device", "cpu", square}, 1, []string{`input "x" f32[1048576 1048576] needs 4.0 TiB, more than the`}},
		{[]string{"info", "-device", "cpu", square}, 1, []string{"needs 8.0 TiB"}},
		{[]string{"-bench", "-5", mlp}, 2, []string{"-bench -5: want 1 to 1000000 runs", "Run 'vrun -h' for usage."}},
		{[]string{"-bench", "2000000000000", mlp}, 2, []string{"want 1 to 1000000 runs"}},
		{[]string{"-bench", "2e12", mlp}, 2, []string{`invalid value "2e12" for flag -bench`}},
		{[]string{"-resident", mlp}, 2, []string{"-resident needs -bench"}},
		{[]string{"-device", "cpu:0,cpu:1", "-shape", "x=4x37", "-bench", "2", "-resident", mlp}, 2, []string{"-resident runs on one device"}},
		{[]string{"-device", "cpu", "-shape", "x=3x37", "-bench", "2", "-resident", mlp}, 0, []string{"bench    2 runs"}},
		{[]string{"-i", "x=a.npy", "-i", "x=b.npy", mlp}, 2, []string{"-i x given twice"}},
		{[]string{"-shape", "x=1x37", "-shape", "x=2x37", mlp}, 2, []string{"-shape x given twice"}},
		{[]string{"convert", "-nosuch"}, 2, []string{"Run 'vrun convert -h' for usage."}},
		{[]string{"convert", "-h"}, 0, []string{"Usage: vrun convert [flags] MODEL.onnx", "-o FILE"}},
		{[]string{"version"}, 0, []string{"vrun ", "backends: "}},
		{[]string{"-version"}, 0, []string{"vrun ", "backends: "}},
		{[]string{"-device", "cpu", "-shape", "x=3x37", mlp}, 0, []string{"output   y"}},
		{[]string{"-precision", "f64", mlp}, 2, []string{"-precision f64: want f32 or f16"}},
		{[]string{"-device", "cpu", "-precision", "f16", "-shape", "x=3x37", mlp}, 1, []string{"precision f16", "cpu: op MatMul not supported for f16"}},
		{[]string{"-device", "cpu", "-precision", "f32", "-shape", "x=3x37", mlp}, 0, []string{"output   y"}},
	} {
		out, code := vrunExit(t, tc.args...)
		if code != tc.code {
			t.Errorf("%v: exit status %d, want %d\n%s", tc.args, code, tc.code, out)
		}
		for _, w := range tc.want {
			if !strings.Contains(out, w) {
				t.Errorf("%v: output lacks %q:\n%s", tc.args, w, out)
			}
		}
		if strings.Contains(out, "goroutine ") || strings.Contains(out, "fatal error") {
			t.Errorf("%v: crashed:\n%s", tc.args, out)
		}
	}
}

func TestJSON(t *testing.T) {
	dir := e2e.Dir()
	outDir := t.TempDir()
	for _, tc := range []struct {
		name  string
		args  []string
		check func(t *testing.T, b []byte)
	}{
		{"devices", []string{"devices", "-json"}, func(t *testing.T, b []byte) {
			var v []backendJSON
			must(t, json.Unmarshal(b, &v))
			found := false
			for _, be := range v {
				for _, d := range be.Devices {
					found = found || (d.Spec == "cpu:0" && d.Kind == "cpu" && d.Memory > 0)
				}
			}
			if !found {
				t.Errorf("no cpu:0 in %s", b)
			}
		}},
		{"info", []string{"info", "-json", "-device", "cpu", filepath.Join(dir, "cnn.bin")}, func(t *testing.T, b []byte) {
			var v infoJSON
			must(t, json.Unmarshal(b, &v))
			if v.Nodes != 13 || v.NodeCounts["Conv"] != 3 || v.Plan.ArenaBytes <= 0 || v.Device.Spec != "cpu:0" ||
				len(v.Inputs) != 1 || !reflect.DeepEqual(v.Inputs[0].Shape, []int64{-1, 3, 15, 13}) || v.Inputs[0].DimNames[0] != "batch" ||
				len(v.Outputs) != 1 || !reflect.DeepEqual(v.Outputs[0].Shape, []int64{-1, 10}) {
				t.Errorf("%s", b)
			}
		}},
		{"run", []string{"-json", "-device", "cpu", "-i", "x=" + filepath.Join(dir, "mlp", "x.npy"), "-o", outDir, "-bench", "3", "-profile", filepath.Join(dir, "mlp.bin")}, func(t *testing.T, b []byte) {
			var v runJSON
			must(t, json.Unmarshal(b, &v))
			if v.Device.Spec != "cpu:0" || len(v.Outputs) != 1 || v.Outputs[0].Stats == nil || len(v.Outputs[0].Top5) != 5 ||
				v.Bench == nil || v.Bench.Runs != 3 || !benchSane(*v.Bench) || len(v.Profile) == 0 || v.Outputs[0].File == "" ||
				v.Memory == nil || v.Memory.ArenaBytes <= 0 || v.Memory.WeightBytes <= 0 || v.Memory.Pool == "" {
				t.Errorf("%s", b)
			}
			want, err := npy.ReadFile(filepath.Join(dir, "mlp", "y.npy"))
			must(t, err)
			if got := v.Outputs[0].Stats.Count; got != want.Len() {
				t.Errorf("count %d, want %d", got, want.Len())
			}
		}},
		{"version", []string{"version", "-json"}, func(t *testing.T, b []byte) {
			var v versionInfo
			must(t, json.Unmarshal(b, &v))
			if v.Version == "" || v.Go == "" || !slices.Contains(v.Backends, "cpu") {
				t.Errorf("%s", b)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			if err := run(tc.args, &out, &errb); err != nil {
				t.Fatal(err)
			}
			tc.check(t, out.Bytes())
		})
	}
	var out, errb bytes.Buffer
	if err := run([]string{"-json"}, &out, &errb); err == nil {
		t.Error("-json without a model ran the demo")
	}
}

// TestPrecisionF16OnVulkan runs the e2e CNN with -precision f16 on
// Vulkan (lavapipe in CI): the report says every Conv and MatMul took f16
// weights (but for shallow Convs kept in f32 for speed on a device with
// f16 tensor-core convolutions), and the outputs stay within 2e-3 of the
// f32 run's, relative to the largest.
func TestPrecisionF16OnVulkan(t *testing.T) {
	if _, err := rt.Open("vulkan", nil); err != nil {
		t.Skipf("no Vulkan device: %v", err)
	}
	cnn := filepath.Join(e2e.Dir(), "cnn.bin")
	outs := map[string]runJSON{}
	for _, p := range []string{"f32", "f16"} {
		var out, errb bytes.Buffer
		if err := run([]string{"-json", "-device", "vulkan", "-precision", p, "-shape", "x=2x3x15x13", cnn}, &out, &errb); err != nil {
			t.Fatalf("-precision %s: %v\n%s", p, err, errb.String())
		}
		var v runJSON
		must(t, json.Unmarshal(out.Bytes(), &v))
		outs[p] = v
	}
	p := outs["f16"].Precision
	// On a device with f16 tensor-core convolutions (convcm.comp), the
	// shallow Convs keep f32 weights for speed, and the notes say so.
	speedOnly := true
	if p != nil {
		for _, n := range p.Notes {
			speedOnly = speedOnly && strings.Contains(n, "runs faster with f32 weights")
		}
	}
	if p == nil || p.Weights != "f16" || p.HalfOps+p.KeptOps != 4 || p.HalfOps == 0 || p.KeptOps > 0 && !speedOnly || outs["f32"].Precision != nil {
		t.Fatalf("precision report %+v (f32 run: %+v), want 4 f16-weight ops (3 Conv, 1 Gemm), or Convs kept in f32 for speed", p, outs["f32"].Precision)
	}
	a, b := outs["f32"].Outputs[0].First, outs["f16"].Outputs[0].First
	big := 0.0
	for _, v := range a {
		big = max(big, math.Abs(float64(v)))
	}
	for i := range a {
		if d := math.Abs(float64(a[i] - b[i])); d > 2e-3*big {
			t.Errorf("y[%d]: f16 weights %v, f32 %v (tolerance %g)", i, b[i], a[i], 2e-3*big)
		}
	}
}

// TestTuneOnVulkan runs the e2e CNN with -tune on Vulkan (lavapipe in
// CI): the report names what the autotuner timed, the picks land in the
// cache, and the outputs of the runs with and without picks match
// NumPy's (testdata/e2e/cnn/y.npy).
func TestTuneOnVulkan(t *testing.T) {
	if _, err := rt.Open("vulkan", nil); err != nil {
		t.Skipf("no Vulkan device: %v", err)
	}
	dir := t.TempDir()
	t.Setenv("VRUN_CACHE_DIR", dir)
	t.Setenv(vulkan.TuneEnv, "0") // restored after the test; -tune sets it
	cnn := filepath.Join(e2e.Dir(), "cnn.bin")
	want, err := npy.ReadFile(filepath.Join(e2e.Dir(), "cnn", "y.npy"))
	must(t, err)
	outs := map[bool]runJSON{}
	for _, tune := range []bool{false, true} {
		o := t.TempDir()
		args := []string{"-json", "-device", "vulkan", "-i", "x=" + filepath.Join(e2e.Dir(), "cnn", "x.npy"), "-o", o, cnn}
		if tune {
			args = append([]string{"-tune"}, args...)
		}
		var out, errb bytes.Buffer
		if err := run(args, &out, &errb); err != nil {
			t.Fatalf("-tune=%v: %v\n%s", tune, err, errb.String())
		}
		var v runJSON
		must(t, json.Unmarshal(out.Bytes(), &v))
		outs[tune] = v
		got, err := npy.ReadFile(filepath.Join(o, "y.npy"))
		must(t, err)
		if err := e2e.Compare(got, want, e2e.RelTol, e2e.AbsTol); err != nil {
			t.Errorf("-tune=%v against NumPy: %v", tune, err)
		}
	}
	if r := outs[true].Tune; len(r) != 1 || !strings.HasPrefix(r[0], "vulkan:0: tuned ") || !strings.Contains(r[0], dir) {
		t.Errorf("-tune report %q, want one line for vulkan:0 naming the cache in %s", r, dir)
	}
	if r := outs[false].Tune; len(r) != 0 {
		t.Errorf("report without -tune and with VRUN_VK_TUNE=0: %q", r)
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "vulkan-tune-*.json")); len(m) != 1 {
		t.Errorf("tuning cache files in %s: %v, want one", dir, m)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestStatsAreNaNAware(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	for _, tc := range []struct {
		v    []float64
		want string
	}{
		{[]float64{1, 2, 3, 4}, "min 1  max 4  mean 2.5  std 1.11803"},
		{[]float64{1, nan, 3}, "min 1  max 3  mean 2  std 1 (of the finite values)  NaN 1"},
		{[]float64{nan, nan}, "all 2 values are NaN"},
		{[]float64{inf, 1, -inf, nan}, "min -Inf  max +Inf  mean 1  std 0 (of the finite values)  NaN 1  +Inf 1  -Inf 1"},
		{[]float64{inf, inf}, "min +Inf  max +Inf  (no finite values)  +Inf 2"},
		{nil, "(empty)"},
	} {
		if got := statsOf(rt.FromFloat64(rt.F32, tc.v, len(tc.v))).String(); got != tc.want {
			t.Errorf("%v: %q, want %q", tc.v, got, tc.want)
		}
	}
	for _, tc := range []struct {
		v    []float64
		want string
	}{
		{[]float64{0.1, nan, 0.7, 0.2}, "top-5: 2 (0.7), 3 (0.2), 0 (0.1) (1 NaN not ranked)"},
		{[]float64{nan, nan}, "top-5: none: all 2 values are NaN"},
		{[]float64{1, 5, 2, 4, 3, 6, -1}, "top-5: 5 (6), 1 (5), 3 (4), 4 (3), 2 (2)"},
		{[]float64{inf, nan, -inf}, "top-5: 0 (+Inf), 2 (-Inf) (1 NaN not ranked)"},
	} {
		x := rt.FromFloat64(rt.F64, tc.v, len(tc.v))
		top, n, ok := top5(x, nil)
		if got := top5String(x, top, n); !ok || got != tc.want {
			t.Errorf("%v: %q, want %q", tc.v, got, tc.want)
		}
	}
	// JSON holds NaN and infinities as strings.
	b, err := json.Marshal(statsOf(rt.FromFloat64(rt.F32, []float64{inf, nan}, 2)))
	if err != nil || !strings.Contains(string(b), `"max":"+Inf"`) || !strings.Contains(string(b), `"mean":null`) {
		t.Errorf("%s, %v", b, err)
	}
}

// Files vrun writes are readable by everyone (0644 under umask 022):
// convert's model.bin, which it writes under a temporary name, and -o's
// .npy outputs.
func TestOutputFileModes(t *testing.T) {
	src := filepath.Join("..", "..", "testdata", "onnx", "node", "test_add", "model.onnx")
	dir := t.TempDir()
	bin := filepath.Join(dir, "add.bin")
	var out, errb bytes.Buffer
	if err := run([]string{"convert", src, "-o", bin}, &out, &errb); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "wrote    "+bin) {
		t.Errorf("convert does not say what it wrote:\n%s", out.String())
	}
	st, err := os.Stat(bin)
	must(t, err)
	if runtime.GOOS == "windows" {
		return // no Unix modes
	}
	if st.Mode().Perm() != 0o644 {
		t.Errorf("%s has mode %v, want 0644", bin, st.Mode().Perm())
	}
	outDir := filepath.Join(dir, "out")
	out.Reset()
	if err := run([]string{"-device", "cpu", "-o", outDir, filepath.Join(e2e.Dir(), "mlp.bin")}, &out, &errb); err != nil {
		t.Fatal(err)
	}
	st, err = os.Stat(filepath.Join(outDir, "y.npy"))
	must(t, err)
	if st.Mode().Perm()&0o644 != 0o644 {
		t.Errorf("y.npy has mode %v, want at least 0644", st.Mode().Perm())
	}
}

// vrun info says when a batch runs in chunks: LeNet-5 on 10,000 MNIST
// images exceeds lavapipe's maxStorageBufferRange (128 MiB) at its first
// Conv. Planning only; the vrun package's test runs it.
func TestInfoChunksOnVulkan(t *testing.T) {
	d, err := rt.Open("vulkan", nil)
	if err != nil {
		t.Skip(err)
	}
	info := d.Info()
	d.Close()
	if info.MaxRange == 0 || info.MaxRange >= 10000*6*28*28*4 {
		t.Skipf("%s addresses %d bytes per operand: no chunks", info.Name, info.MaxRange)
	}
	m, err := train.Arch("lenet", train.ArchOptions{Sample: []int{1, 28, 28}, Outputs: 10})
	must(t, err)
	path := filepath.Join(t.TempDir(), "lenet.bin")
	must(t, model.WriteFile(path, m))
	var out, errb bytes.Buffer
	if err := run([]string{"info", "-device", "vulkan", "-shape", "x=10000x1x28x28", path}, &out, &errb); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"per chunk of ", "chunks   10000 rows run in chunks of", "maxStorageBufferRange", "output   logits       f32[10000 10]"} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("info lacks %q:\n%s", w, out.String())
		}
	}
}

// benchSane says whether -bench's figures are ordered and finite. On
// Windows the clock may be too coarse to see a short run (times and rates
// 0); elsewhere every figure must be positive.
func benchSane(b benchResult) bool {
	ordered := 0 <= b.MinMS && b.MinMS <= b.MedianMS && b.MedianMS <= b.P90MS && b.RunsPerS >= 0 &&
		!math.IsInf(b.RunsPerS, 0) && b.ItemsPerS == b.RunsPerS*float64(b.Batch)
	if runtime.GOOS == "windows" {
		return ordered
	}
	return ordered && b.MinMS > 0 && b.RunsPerS > 0
}
