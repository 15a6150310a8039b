package realmodels

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/vrun-go/vrun/engine"
	"github.com/vrun-go/vrun/model"
	"github.com/vrun-go/vrun/model/onnx"
	"github.com/vrun-go/vrun/npy"
	"github.com/vrun-go/vrun/rt"
)

// Counted is a freshly opened device and a count of the kernels,
// pipelines or programs it has built so far.
type Counted struct {
	Dev   rt.Device
	Built func() int64
}

// Opener opens a fresh device for CheckPrepared and CheckSecondProcess;
// with prepare false the device's rt.Preparer does nothing, so that its
// kernels are built lazily by Stream.Launch.
type Opener func(t *testing.T, prepare bool) Counted

// load imports committed model name with its input and PyTorch output.
func load(t *testing.T, name string) (m *model.Model, x, want *rt.Tensor) {
	t.Helper()
	base := filepath.Join(Dir(), name)
	m, err := onnx.ImportFile(base+".onnx", onnx.Options{Supported: engine.SupportedOps})
	if err != nil {
		t.Fatal(err)
	}
	if x, err = npy.ReadFile(base + ".x.npy"); err != nil {
		t.Fatal(err)
	}
	if want, err = npy.ReadFile(base + ".torch.npy"); err != nil {
		t.Fatal(err)
	}
	return m, x, want
}

// planRun plans m on dev for x and runs it once; it returns the output
// and the device's build counts after planning and after the run.
func planRun(t *testing.T, c Counted, m *model.Model, x *rt.Tensor) (y *rt.Tensor, planned, ran int64) {
	t.Helper()
	in, out := m.Tensors[m.Inputs()[0]].Name, m.Tensors[m.Outputs()[0]].Name
	s, err := engine.New(m, c.Dev, engine.Options{Shapes: map[string][]int{in: x.Shape}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	planned = c.Built()
	res, err := s.Run(context.Background(), map[string]*rt.Tensor{in: x})
	if err != nil {
		t.Fatal(err)
	}
	return res[out], planned, c.Built()
}

// checkOutput compares y with PyTorch's output within Tol.
func checkOutput(t *testing.T, what string, y, want *rt.Tensor) {
	t.Helper()
	rel, i, err := MaxError(y, want)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if !(rel <= Tol) {
		t.Errorf("%s: max error %.3g of max|want| exceeds %g (element %d: got %.7g, want %.7g)", what, rel, Tol, i, y.Float64(i), want.Float64(i))
	}
}

// CheckPrepared plans every committed model on a fresh device and runs
// it once. Planning must build the kernels (the engine hands the plan to
// the device's rt.Preparer) and the run must build none; a second fresh
// device without Prepare, which builds them lazily during its run, must
// end with as many, so that Prepare builds exactly what the plan uses.
// The outputs are checked against PyTorch's within Tol.
func CheckPrepared(t *testing.T, open Opener) {
	for _, name := range Models {
		t.Run(name, func(t *testing.T) {
			m, x, want := load(t, name)
			c := open(t, true)
			y, planned, ran := planRun(t, c, m, x)
			checkOutput(t, "prepared", y, want)
			if planned == 0 {
				t.Errorf("planning built no kernels")
			}
			if ran != planned {
				t.Errorf("the first run built %d kernels after planning had built %d", ran-planned, planned)
			}
			lazy := open(t, false)
			y, _, lazyRan := planRun(t, lazy, m, x)
			checkOutput(t, "lazy", y, want)
			if lazyRan != ran {
				t.Errorf("Prepare built %d kernels, launching without it %d", ran, lazyRan)
			}
			t.Logf("%d kernels, all built at planning", ran)
		})
	}
}

// childEnv holds, in a child process of CheckSecondProcess, the file
// that receives its output.
const childEnv = "VRUN_REALMODELS_CHILD_OUT"

// CheckSecondProcess runs squeezenet1_1 in two child processes of the
// test binary (running test, the caller's top-level test, which must call
// CheckSecondProcess first) that share fresh cache directories
// (VRUN_CACHE_DIR, and XDG_CACHE_HOME for the drivers' own caches): the
// second finds the first's pipeline or program caches, and both outputs
// must be equal bit for bit and within Tol of PyTorch's. In a child it
// does the run and writes its output; the caller's test then returns.
func CheckSecondProcess(t *testing.T, test string, open Opener) (child bool) {
	const name = "squeezenet1_1"
	if path := os.Getenv(childEnv); path != "" {
		m, x, _ := load(t, name)
		c := open(t, true)
		y, planned, ran := planRun(t, c, m, x)
		if err := npy.WriteFile(path, y); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path+".count", []byte(strconv.FormatInt(planned, 10)+" "+strconv.FormatInt(ran, 10)), 0o644); err != nil {
			t.Fatal(err)
		}
		return true
	}
	if testing.Short() {
		t.Skip("runs two child processes")
	}
	_, _, want := load(t, name)
	dir := t.TempDir()
	var outs []*rt.Tensor
	for i := 0; i < 2; i++ {
		path := filepath.Join(dir, "y"+strconv.Itoa(i)+".npy")
		cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.v")
		cmd.Env = append(os.Environ(), childEnv+"="+path, "VRUN_CACHE_DIR="+filepath.Join(dir, "cache"),
			"XDG_CACHE_HOME="+filepath.Join(dir, "xdg"))
		var log bytes.Buffer
		cmd.Stdout, cmd.Stderr = &log, &log
		if err := cmd.Run(); err != nil {
			t.Fatalf("process %d: %v\n%s", i+1, err, log.String())
		}
		y, err := npy.ReadFile(path)
		if err != nil {
			t.Fatalf("process %d: %v\n%s", i+1, err, log.String())
		}
		cnt, _ := os.ReadFile(path + ".count")
		f := strings.Fields(string(cnt))
		if len(f) != 2 || f[0] != f[1] {
			t.Errorf("process %d: kernels built after planning and after the run: %q", i+1, cnt)
		}
		t.Logf("process %d: %s kernels built or loaded at planning", i+1, f)
		outs = append(outs, y)
		if i == 0 {
			if files, _ := filepath.Glob(filepath.Join(dir, "cache", "*", "*")); len(files) == 0 {
				if files, _ := filepath.Glob(filepath.Join(dir, "cache", "*")); len(files) == 0 {
					t.Errorf("the first process left no cache under %s", filepath.Join(dir, "cache"))
				}
			}
		}
	}
	checkOutput(t, "first process", outs[0], want)
	if !bytes.Equal(outs[0].Data, outs[1].Data) {
		rel, i, _ := MaxError(outs[1], outs[0])
		t.Errorf("the second process (with the first's caches) differs: %.3g of max|output| at element %d", rel, i)
	}
	return false
}
