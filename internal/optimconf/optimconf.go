package optimconf

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"testing"

	"github.com/vrun-go/vrun/internal/backendtest"
	"github.com/vrun-go/vrun/internal/repo"
	"github.com/vrun-go/vrun/npy"
	"github.com/vrun-go/vrun/rt"
)

// Hyper is the hyperparameters of an optimizer case, with the names of
// torch.optim in the JSON of the reference generators: the step cases here
// and the optimizer cases of internal/optimref embed it.
type Hyper struct {
	LR          float64 `json:"lr"`
	Momentum    float64 `json:"momentum"`
	Dampening   float64 `json:"dampening"`
	Nesterov    bool    `json:"nesterov"`
	WeightDecay float64 `json:"weight_decay"`
	Beta1       float64 `json:"beta1"`
	Beta2       float64 `json:"beta2"`
	Eps         float64 `json:"eps"`
	Alpha       float64 `json:"alpha"`
	Centered    bool    `json:"centered"`
	LRDecay     float64 `json:"lr_decay"`
}

// Case is one configuration of testdata/optimstep/cases.json.
type Case struct {
	Name string `json:"name"`
	Fn   string `json:"fn"`
	Hyper
	Decoupled bool      `json:"decoupled"`
	Init      string    `json:"init"`
	Scale     bool      `json:"scale"`
	States    [3]string `json:"states"` // npz array of the initial S1, S2, S3 ("" when absent)
}

// Manifest is testdata/optimstep/cases.json.
type Manifest struct {
	Steps     int            `json:"steps"`
	Sizes     []int          `json:"sizes"`
	T0        map[string]int `json:"t0"`
	Scales    []float64      `json:"scales"`
	LRFactors []float64      `json:"lr_factors"`
	Cases     []Case         `json:"cases"`
}

var fns = map[string]rt.OptimFn{"sgd": rt.OptimSGD, "adam": rt.OptimAdam, "adagrad": rt.OptimAdaGrad, "rmsprop": rt.OptimRMSProp}

// Op returns c's OptimStep without operands.
func (c Case) Op() (*rt.OptimStep, error) {
	fn, ok := fns[c.Fn]
	if !ok {
		return nil, fmt.Errorf("optimconf: %s: unknown fn %q", c.Name, c.Fn)
	}
	return &rt.OptimStep{Fn: fn, Momentum: c.Momentum, Dampening: c.Dampening, Beta1: c.Beta1, Beta2: c.Beta2,
		Eps: c.Eps, WeightDecay: c.WeightDecay, Alpha: c.Alpha, Nesterov: c.Nesterov, Decoupled: c.Decoupled,
		Centered: c.Centered}, nil
}

// Load reads the manifest.
func Load() (*Manifest, error) { return repo.LoadJSON[Manifest]("testdata/optimstep/cases.json") }

// LoadArrays reads the inputs and references of dtype dt (f32 or f64).
func LoadArrays(dt rt.DType) (map[string]*rt.Tensor, error) {
	dir, err := repo.Path("testdata/optimstep")
	if err != nil {
		return nil, err
	}
	return npy.ReadNPZFile(filepath.Join(dir, dt.String()+".npz"))
}

// Tol returns the tolerances (rtol, atol) of dt: |got - want| <= atol +
// rtol·M for every element of the parameter, the states and the scaled
// gradient after every step, where M is the largest |want| of that array
// after that step. The backend and torch evaluate the same formula in the
// same dtype; they differ where one rounds a product before an add and the
// other fuses them (torch's CPU kernels are built with multiply-add
// contraction), a unit in the last place here and there. Where terms of
// opposite signs meet (a momentum buffer, m = β₁m + (1-β₁)g, a centered
// variance) the sum is smaller than its terms and those rounding errors
// stay as large as the terms', so the error is measured against the
// array's scale rather than each element. Measured on the CPU backend: at
// most 3.2e-6·M in f32 (about 30 units in the last place of an element 10
// times smaller than M), 6.1e-15·M in f64. A wrong coefficient, a missed
// term or a swapped state is off by far more: weight decay moves a
// parameter by 1e-3·M per step, Adam's eps (1e-8) by more than 1e-11·M in
// f64.
func Tol(dt rt.DType) (rtol, atol float64) {
	if dt == rt.F64 {
		return 5e-14, 1e-18
	}
	return 1e-5, 1e-9
}

// Run checks d's OptimStep on every case, size and dtype. A dtype the
// device does not support (an *rt.UnsupportedError from Supports) is
// skipped with the reason. f16, which no backend implements, must be
// reported unsupported.
func Run(t *testing.T, d rt.Device) {
	m, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	t.Run("f16", func(t *testing.T) {
		buf, err := d.Alloc(256)
		if err != nil {
			t.Fatal(err)
		}
		defer buf.Free()
		v := func(n int) rt.Ref { return rt.Ref{Buf: buf, DType: rt.F16, Shape: []int{n}} }
		op := &rt.OptimStep{Fn: rt.OptimSGD, P: v(4), G: v(4), H: v(rt.OptimHyperLen), N: 4}
		var ue *rt.UnsupportedError
		if err := d.Supports(op); !errors.As(err, &ue) {
			t.Errorf("Supports(f16 OptimStep) = %v, want an *rt.UnsupportedError", err)
		}
	})
	for _, dt := range []rt.DType{rt.F32, rt.F64} {
		t.Run(dt.String(), func(t *testing.T) {
			arr, err := LoadArrays(dt)
			if err != nil {
				t.Fatal(err)
			}
			worst := 0.0
			for _, c := range m.Cases {
				for _, n := range m.Sizes {
					t.Run(fmt.Sprintf("%s/n%d", c.Name, n), func(t *testing.T) {
						w, err := Check(t, d, m, c, dt, n, arr)
						var ue *rt.UnsupportedError
						if errors.As(err, &ue) {
							t.Skip(err)
						}
						if err != nil {
							t.Fatal(err)
						}
						worst = max(worst, w)
					})
				}
			}
			t.Logf("%s on %s: worst error %.3g of the tolerance", dt, d.Info().Name, worst)
		})
	}
}

// operand is one operand's place in the test buffer.
type operand struct {
	name string
	off  int // element offset
	n    int
}

// Check runs case c on n parameters of dtype dt for m.Steps steps and
// compares the parameter, states and scaled gradient with torch's after
// every step. It returns the worst error as a fraction of the tolerance,
// and an error describing the first element over it (or Supports' error);
// a failing launch fails t. The operands lie at
// odd element offsets of one buffer.
func Check(t testing.TB, d rt.Device, m *Manifest, c Case, dt rt.DType, n int, arr map[string]*rt.Tensor) (float64, error) {
	op, err := c.Op()
	if err != nil {
		return 0, err
	}
	get := func(key string) (*rt.Tensor, error) {
		x, ok := arr[key]
		if !ok {
			return nil, fmt.Errorf("optimconf: %s.npz lacks %s", dt, key)
		}
		if x.DType != dt {
			return nil, fmt.Errorf("optimconf: %s is %s, want %s", key, x.DType, dt)
		}
		return x, nil
	}
	// Layout: P, G, S1..S3, H, Scale, each 3 elements after the previous.
	var ops []operand
	end := 3
	place := func(name string, k int) operand {
		o := operand{name, end, k}
		end += k + 3
		ops = append(ops, o)
		return o
	}
	oP, oG := place("P", n), place("G", n)
	var oS [3]operand
	for k, s := range c.States {
		if s != "" {
			oS[k] = place(fmt.Sprintf("S%d", k+1), n)
		}
	}
	oH := place("H", rt.OptimHyperLen)
	var oScale operand
	if c.Scale {
		oScale = place("Scale", 1)
	}
	es := dt.Size()
	buf, err := d.Alloc(int64(end * es))
	if err != nil {
		return 0, err
	}
	defer buf.Free()
	ref := func(o operand) rt.Ref {
		return rt.Ref{Buf: buf, Off: int64(o.off * es), DType: dt, Shape: []int{o.n}}
	}
	write := func(o operand, data []byte) error { return d.Write(buf, int64(o.off*es), data) }
	read := func(o operand) ([]byte, error) {
		b := make([]byte, o.n*es)
		return b, d.Read(b, buf, int64(o.off*es))
	}
	op.P, op.G, op.H, op.N = ref(oP), ref(oG), ref(oH), n
	states := []*rt.Ref{&op.S1, &op.S2, &op.S3}
	for k := range oS {
		if c.States[k] != "" {
			*states[k] = ref(oS[k])
		}
	}
	if c.Scale {
		op.Scale = ref(oScale)
	}
	if err := d.Supports(op); err != nil {
		return 0, err
	}
	// Fill the whole buffer with NaN first: a kernel reading a gap or a
	// missing operand poisons its result.
	nan := make([]float64, end)
	for i := range nan {
		nan[i] = math.NaN()
	}
	if err := d.Write(buf, 0, rt.FromFloat64(dt, nan, end).Data); err != nil {
		return 0, err
	}
	p0, err := get(fmt.Sprintf("n%d_p", n))
	if err != nil {
		return 0, err
	}
	if err := write(oP, p0.Data); err != nil {
		return 0, err
	}
	for k, s := range c.States {
		if s == "" {
			continue
		}
		x, err := get(fmt.Sprintf("n%d_%s", n, s))
		if err != nil {
			return 0, err
		}
		if err := write(oS[k], x.Data); err != nil {
			return 0, err
		}
	}
	grads, err := get(fmt.Sprintf("n%d_g", n))
	if err != nil {
		return 0, err
	}
	t0, ok := m.T0[c.Init]
	if !ok {
		return 0, fmt.Errorf("optimconf: %s: unknown init %q", c.Name, c.Init)
	}
	type check struct {
		name string
		o    operand
	}
	checks := []check{{"p", oP}}
	for k := range oS {
		if c.States[k] != "" {
			checks = append(checks, check{fmt.Sprintf("s%d", k+1), oS[k]})
		}
	}
	if c.Scale {
		checks = append(checks, check{"g", oG})
	}
	rtol, atol := Tol(dt)
	worst := 0.0
	for step := 0; step < m.Steps; step++ {
		if err := write(oG, grads.Data[step*n*es:(step+1)*n*es]); err != nil {
			return 0, err
		}
		h := op.Hyper(t0+step+1, c.LR*m.LRFactors[step], c.LRDecay)
		if err := write(oH, rt.FromFloat64(dt, h, len(h)).Data); err != nil {
			return 0, err
		}
		if c.Scale {
			if err := write(oScale, rt.FromFloat64(dt, []float64{m.Scales[step]}, 1).Data); err != nil {
				return 0, err
			}
		}
		backendtest.Run(t, d, op)
		for _, ck := range checks {
			want, err := get(fmt.Sprintf("%s__n%d__%s", c.Name, n, ck.name))
			if err != nil {
				return 0, err
			}
			b, err := read(ck.o)
			if err != nil {
				return 0, err
			}
			got := &rt.Tensor{DType: dt, Shape: []int{n}, Data: b}
			wt := &rt.Tensor{DType: dt, Shape: []int{n}, Data: want.Data[step*n*es : (step+1)*n*es]}
			scale := 0.0
			for i := 0; i < n; i++ {
				scale = max(scale, math.Abs(wt.Float64(i)))
			}
			for i := 0; i < n; i++ {
				g, w := got.Float64(i), wt.Float64(i)
				e := math.Abs(g-w) / (atol + rtol*scale)
				if math.IsNaN(e) {
					e = math.Inf(1)
				}
				if e > 1 {
					return worst, fmt.Errorf("step %d: %s[%d] = %.17g, torch %.17g (%.3g× the tolerance; largest |%s| %.3g)", step+1, ck.name, i, g, w, e, ck.name, scale)
				}
				worst = max(worst, e)
			}
		}
	}
	return worst, nil
}
