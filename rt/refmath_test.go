package rt_test

import (
	"math"
	"testing"

	"github.com/vrun-go/vrun/internal/repo"
	"github.com/vrun-go/vrun/npy"
	"github.com/vrun-go/vrun/rt"
)

// TestApplyNumPy checks UnaryFn.Apply and BinaryFn.Apply, the float64
// references that backends' tests and the CPU backend use, against NumPy
// (testdata/elementwise, f64 arrays): every function, every input.
func TestApplyNumPy(t *testing.T) {
	p, err := repo.Path("testdata/elementwise/elementwise.npz")
	if err != nil {
		t.Fatal(err)
	}
	arrs, err := npy.ReadNPZFile(p)
	if err != nil {
		t.Fatal(err)
	}
	get := func(name string) []float64 {
		a, ok := arrs["f64/"+name]
		if !ok {
			t.Fatalf("testdata/elementwise has no f64 array %q", name)
		}
		return a.Float64s()
	}
	near := func(got, want float64) bool {
		if math.IsNaN(want) || math.IsInf(want, 0) {
			return math.IsNaN(got) == math.IsNaN(want) && (math.IsNaN(want) || got == want)
		}
		return math.Abs(got-want) <= 1e-13*math.Max(1, math.Abs(want))
	}
	for fn := rt.UnaryFn(0); int(fn) < rt.NumUnaryFns; fn++ {
		x, y := get(fn.String()+".x"), get(fn.String()+".y")
		for i := range x {
			if got := fn.Apply(x[i], 0.7, 1.3); !near(got, y[i]) {
				t.Errorf("%s(%v) = %v, NumPy %v", fn, x[i], got, y[i])
			}
		}
	}
	for fn := rt.BinaryFn(0); int(fn) < rt.NumBinaryFns; fn++ {
		a, b, y := get(fn.String()+".a"), get(fn.String()+".b"), get(fn.String()+".y")
		for i := range a {
			for j := range b {
				if got := fn.Apply(a[i], b[j]); !near(got, y[i*len(b)+j]) {
					t.Errorf("%s(%v, %v) = %v, NumPy %v", fn, a[i], b[j], got, y[i*len(b)+j])
				}
			}
		}
	}
}
