//go:build cgo

package cudashim

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/vrun-go/vrun/internal/optimconf"
	"github.com/vrun-go/vrun/internal/optimref"
	"github.com/vrun-go/vrun/rt"
)

// Tests of OptimStep, the module optim.ptx. TestOptimStep needs a GPU and
// the built optim.ptx; the others need neither.

// TestOptimStep checks OptimStep against torch.optim (testdata/optimstep)
// on the CUDA device. While optim.ptx is the placeholder every case skips
// with the reason.
func TestOptimStep(t *testing.T) {
	d := openTest(t, true)
	optimconf.Run(t, d)
}

// TestOptimizers trains every optimizer configuration of testdata/optim
// for 20 steps on the CUDA device and compares the weights after each
// step with torch.optim's. While optim.ptx is the placeholder every case
// skips with the reason.
func TestOptimizers(t *testing.T) {
	d := openTest(t, true)
	optimref.Check(t, d)
}

// TestOptimPlaceholder checks that while optim.ptx is the placeholder a
// device reports OptimStep as unsupported with the reason, and other ops
// as supported.
func TestOptimPlaceholder(t *testing.T) {
	if !OptimPTXIsPlaceholder() && os.Getenv(optimPTXOverride) == "" {
		if gpuSkip == "" {
			if d := openTest(t, true); d.noOptim != "" {
				t.Fatalf("optim.ptx is built but the device reports %q", d.noOptim)
			}
		}
		t.Skip("optim.ptx is built")
	}
	if os.Getenv(optimPTXOverride) != "" {
		t.Skip(optimPTXOverride + " is set")
	}
	check := func(d *Device) {
		t.Helper()
		buf := &Buffer{dev: d, size: 1 << 10, ptr: 1 << 32}
		f := func(n int) rt.Ref { return rt.Ref{Buf: buf, DType: rt.F32, Shape: []int{n}} }
		op := &rt.OptimStep{Fn: rt.OptimSGD, P: f(4), G: f(4), H: f(rt.OptimHyperLen), N: 4}
		err := d.Supports(op)
		var ue *rt.UnsupportedError
		if !errors.As(err, &ue) || ue.Reason != optimNotBuilt {
			t.Errorf("Supports = %v, want *rt.UnsupportedError with reason %q", err, optimNotBuilt)
		}
		if err := d.Supports(&rt.Unary{Fn: rt.Relu, X: f(4), Y: f(4)}); err != nil {
			t.Errorf("Unary: %v", err)
		}
	}
	check(&Device{noOptim: optimNotBuilt})
	if gpuSkip == "" {
		d := openTest(t, true)
		if d.noOptim != optimNotBuilt {
			t.Fatalf("device noOptim = %q, want %q", d.noOptim, optimNotBuilt)
		}
		check(d)
	}
}

// TestOptimEnumsMatchRT checks the update rules, H slots and flag bits of
// kernels/optim.cu against package rt.
func TestOptimEnumsMatchRT(t *testing.T) {
	src, err := os.ReadFile(filepath.Join(kernelsDir(), "optim.cu"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{
		"O_SGD": int(rt.OptimSGD), "O_Adam": int(rt.OptimAdam), "O_AdaGrad": int(rt.OptimAdaGrad), "O_RMSProp": int(rt.OptimRMSProp),
		"OH_LR": rt.OptimLR, "OH_FIRST": rt.OptimFirst, "OH_STEPSIZE": rt.OptimStepSize, "OH_BC2SQRT": rt.OptimBC2Sqrt, "OH_DECAY": rt.OptimDecay,
		"OF_SCALE": rt.OptimFlagScale, "OF_WD": rt.OptimFlagWD, "OF_MOMENTUM": rt.OptimFlagMomentum, "OF_NESTEROV": rt.OptimFlagNesterov,
		"OF_DECOUPLED": rt.OptimFlagDecoupled, "OF_CENTERED": rt.OptimFlagCentered,
	}
	got := map[string]int{}
	for _, m := range regexp.MustCompile(`\b(O[HF]?_\w+)\s*=\s*(\d+)`).FindAllStringSubmatch(string(src), -1) {
		got[m[1]], _ = strconv.Atoi(m[2])
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("optim.cu: %s = %d (defined: %v), rt has %d", k, g, ok, v)
		}
	}
	if len(got) != len(want) {
		t.Errorf("optim.cu defines %v, want the %d constants of rt", got, len(want))
	}
	if rt.NumOptimFns != 4 {
		t.Errorf("rt has %d update rules, optim.cu knows 4", rt.NumOptimFns)
	}
}

// TestOptimArgsLayout checks, without a GPU, that the argument words the
// lowering packs land in the fields of OptimArgs of kernels/optim.cu, by
// name and in order, and that each dtype picks its kernel.
func TestOptimArgsLayout(t *testing.T) {
	src, err := os.ReadFile(filepath.Join(kernelsDir(), "optim.cu"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?s)struct OptimArgs \{(.*?)\};`).FindStringSubmatch(string(src))
	if m == nil {
		t.Fatal("optim.cu has no struct OptimArgs")
	}
	var fields []string
	for _, decl := range strings.Split(m[1], ";") {
		decl = strings.TrimSpace(decl)
		if decl == "" {
			continue
		}
		typ, names, ok := strings.Cut(decl, " ")
		if !ok || (typ != "u64" && typ != "i64" && typ != "double") {
			t.Fatalf("optim.cu: OptimArgs field %q is not u64, i64 or double", decl)
		}
		for _, n := range strings.Split(names, ",") {
			fields = append(fields, strings.TrimSpace(n))
		}
	}
	d := &Device{}
	const base = 1 << 32
	buf := &Buffer{dev: d, size: 1 << 20, ptr: base}
	for _, dt := range []rt.DType{rt.F32, rt.F64} {
		es := int64(dt.Size())
		r := func(off int64, n int) rt.Ref { return rt.Ref{Buf: buf, Off: off * es, DType: dt, Shape: []int{n}} }
		op := &rt.OptimStep{Fn: rt.OptimRMSProp, P: r(8, 37), G: r(64, 37), S1: r(128, 37), S2: r(192, 37), S3: r(256, 37),
			H: r(320, rt.OptimHyperLen), Scale: r(330, 1), N: 37, Momentum: 0.7, Alpha: 0.95, Eps: 1e-6, WeightDecay: 0.05, Centered: true}
		if err := rt.CheckOp(op); err != nil {
			t.Fatal(err)
		}
		ls, _, err := d.lower(op)
		if err != nil || len(ls) != 1 {
			t.Fatalf("lower: %d launches, %v", len(ls), err)
		}
		l := ls[0]
		if want := map[rt.DType]int{rt.F32: kOptimF, rt.F64: kOptimD}[dt]; l.kernel != want {
			t.Errorf("%s: kernel %s, want %s", dt, kernelNames[l.kernel], kernelNames[want])
		}
		c := op.Coefs()
		want := map[string]float64{"p": base + 8*float64(es), "g": base + 64*float64(es), "s1": base + 128*float64(es),
			"s2": base + 192*float64(es), "s3": base + 256*float64(es), "h": base + 320*float64(es), "scale": base + 330*float64(es),
			"n": 37, "fn": float64(rt.OptimRMSProp), "flags": float64(op.Flags()),
			"c0": c[0], "c1": c[1], "c2": c[2], "c3": c[3], "eps": c[rt.OptimCoefEps], "wd": c[rt.OptimCoefWD]}
		if len(l.args) != 8*len(fields) || len(want) != len(fields) {
			t.Fatalf("%d argument bytes and %d expected fields; OptimArgs has %v", len(l.args), len(want), fields)
		}
		words := &rt.Tensor{DType: rt.I64, Shape: []int{len(fields)}, Data: l.args}
		reals := &rt.Tensor{DType: rt.F64, Shape: []int{len(fields)}, Data: l.args}
		for i, f := range fields {
			w, ok := want[f]
			if !ok {
				t.Errorf("OptimArgs field %s not expected", f)
				continue
			}
			got := words.Float64(i)
			if strings.HasPrefix(f, "c") || f == "eps" || f == "wd" {
				got = reals.Float64(i)
			}
			if got != w {
				t.Errorf("%s: field %d (%s) = %v, want %v", dt, i, f, got, w)
			}
		}
	}
	if kernelNames[kOptimF] != "optim_f" || kernelNames[kOptimD] != "optim_d" {
		t.Errorf("kernel names %v", kernelNames[numIndexedEnd:])
	}
}
