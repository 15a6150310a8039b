package cpu

import (
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/vrun-go/vrun/internal/repo"
	"github.com/vrun-go/vrun/npy"
	"github.com/vrun-go/vrun/rt"
)

// The parameters testdata/elementwise/gen.py gives the unary functions.
const ewAlpha, ewBeta = 0.7, 1.3

// ewRef holds NumPy's elementwise references (testdata/elementwise): the
// arrays of elementwise.npz as float64, by "dtype/Fn.x" and the like.
type ewRef map[string][]float64

var (
	ewOnce sync.Once
	ewData ewRef
	ewErr  error
)

// ewRefs loads testdata/elementwise/elementwise.npz once.
func ewRefs(t testing.TB) ewRef {
	t.Helper()
	ewOnce.Do(func() {
		var p string
		if p, ewErr = repo.Path("testdata/elementwise/elementwise.npz"); ewErr != nil {
			return
		}
		var arrs map[string]*rt.Tensor
		if arrs, ewErr = npy.ReadNPZFile(p); ewErr != nil {
			return
		}
		ewData = ewRef{}
		for k, v := range arrs {
			ewData[k] = v.Float64s()
		}
	})
	if ewErr != nil {
		t.Fatalf("NumPy references: %v (run /usr/bin/python3 testdata/elementwise/gen.py)", ewErr)
	}
	return ewData
}

// lookup returns the array name ("Relu.x") of dtype dt, or nil.
func (r ewRef) lookup(dt rt.DType, name string) []float64 {
	return r[strings.ToLower(dt.String())+"/"+name]
}

// get is lookup that fails the test when the array is missing.
func (r ewRef) get(t testing.TB, dt rt.DType, name string) []float64 {
	t.Helper()
	v := r.lookup(dt, name)
	if v == nil {
		t.Fatalf("testdata/elementwise has no %s array %q (run gen.py)", dt, name)
	}
	return v
}

// picks returns n indices into an array of length m, drawn at random;
// when lo < hi, every other one is drawn from [lo, hi) instead.
func picks(rng *rand.Rand, n, m, lo, hi int) []int {
	p := make([]int, n)
	for i := range p {
		if lo < hi && i%2 == 0 {
			p[i] = lo + rng.IntN(hi-lo)
		} else {
			p[i] = rng.IntN(m)
		}
	}
	return p
}
