package cpu

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/vrun-go/vrun/internal/backendtest"
	"github.com/vrun-go/vrun/rt"
)

const (
	sentinel = 0xA5
	guard    = 64 // bytes of sentinel before and after every region
)

type env struct {
	t   testing.TB
	dev rt.Device
	st  rt.Stream
}

func newEnv(t testing.TB) *env {
	t.Helper()
	d, err := rt.Open("cpu", nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := d.NewStream(rt.StreamOptions{Profile: true})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, dev: d, st: s}
	t.Cleanup(func() { d.Close() })
	return e
}

// region is n elements of dtype dt at byte offset guard of a buffer whose
// other bytes hold the sentinel (or, with noGuard, at offset 0 of a buffer
// of exactly that size).
type region struct {
	buf     rt.Buffer
	dt      rt.DType
	n       int
	noGuard bool
}

func (e *env) region(dt rt.DType, n int, vals []float64) *region {
	e.t.Helper()
	size := int64(2*guard + n*dt.Size())
	b, err := e.dev.Alloc(size)
	if err != nil {
		e.t.Fatal(err)
	}
	raw := make([]byte, size)
	for i := range raw {
		raw[i] = sentinel
	}
	if vals != nil {
		tt := &rt.Tensor{DType: dt, Shape: []int{n}, Data: raw[guard : guard+n*dt.Size()]}
		for i, v := range vals {
			tt.SetFloat64(i, v)
		}
	}
	if err := e.dev.Write(b, 0, raw); err != nil {
		e.t.Fatal(err)
	}
	return &region{buf: b, dt: dt, n: n}
}

// ref views the region with shape and strides starting at element off.
func (r *region) view(off int, shape []int, strides []int) rt.Ref {
	g := guard
	if r.noGuard {
		g = 0
	}
	return rt.Ref{Buf: r.buf, Off: int64(g + off*r.dt.Size()), DType: r.dt, Shape: shape, Strides: strides}
}

func (r *region) ref(shape ...int) rt.Ref { return r.view(0, shape, nil) }

// values reads the region back and checks the sentinels around it.
func (e *env) values(r *region) []float64 {
	e.t.Helper()
	raw := make([]byte, 2*guard+r.n*r.dt.Size())
	if err := e.dev.Read(raw, r.buf, 0); err != nil {
		e.t.Fatal(err)
	}
	for i := range guard {
		if raw[i] != sentinel || raw[len(raw)-1-i] != sentinel {
			e.t.Fatalf("sentinel around output overwritten")
		}
	}
	tt := &rt.Tensor{DType: r.dt, Shape: []int{r.n}, Data: raw[guard : len(raw)-guard]}
	return tt.Float64s()
}

// stored returns vals as they round-trip through dtype dt.
func stored(dt rt.DType, vals []float64) []float64 {
	return rt.FromFloat64(dt, vals, len(vals)).Float64s()
}

func (e *env) run(ops ...rt.Op) {
	e.t.Helper()
	e.st.Reset()
	for _, op := range ops {
		if err := e.st.Launch(op); err != nil {
			e.t.Fatalf("Launch %s: %v", op.OpName(), err)
		}
	}
	if err := e.st.Submit(); err != nil {
		e.t.Fatalf("Submit: %v", err)
	}
	if err := e.st.Wait(); err != nil {
		e.t.Fatalf("Wait: %v", err)
	}
}

func (e *env) launchErr(op rt.Op) error {
	e.st.Reset()
	return e.st.Launch(op)
}

func randVals(rng *rand.Rand, n int, lo, hi float64) []float64 {
	v := make([]float64, n)
	for i := range v {
		for {
			x := lo + (hi-lo)*rng.Float64()
			if math.Abs(x) > 0.05 || lo >= 0 {
				v[i] = x
				break
			}
		}
	}
	return v
}

func tolFor(dt rt.DType) float64 {
	switch dt {
	case rt.F64:
		return 1e-12
	case rt.F16:
		return 1e-3
	}
	return 1e-5
}

// closeTo compares with relative tolerance tol against max(|want|, scale).
func closeTo(got, want, tol, scale float64) bool {
	if math.IsNaN(want) {
		return math.IsNaN(got)
	}
	if math.IsInf(want, 0) {
		return got == want
	}
	return math.Abs(got-want) <= tol*math.Max(math.Abs(want), scale)
}

func checkVals(t testing.TB, name string, got, want []float64, tol float64, scale func(i int) float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", name, len(got), len(want))
	}
	bad := 0
	for i := range want {
		s := 1e-30
		if scale != nil {
			s = scale(i)
		}
		if !closeTo(got[i], want[i], tol, s) {
			if bad < 5 {
				t.Errorf("%s: [%d] = %v, want %v", name, i, got[i], want[i])
			}
			bad++
		}
	}
	if bad > 0 {
		t.Errorf("%s: %d of %d values wrong", name, bad, len(want))
	}
}

// at reads element idx of a strided view of vals.
func at(vals []float64, off int, st []int, idx []int) float64 {
	return vals[off+backendtest.Offset(idx, st)]
}

func isErr(err, target error) bool { return errors.Is(err, target) }
