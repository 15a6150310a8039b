//go:build linux && amd64 && !purego

package cpu

import (
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/vrun-go/vrun/rt"
)

// guardedF64 returns n float64s that end (atEnd) or start at an
// inaccessible page (see guarded).
func guardedF64(t *testing.T, n int, atEnd bool) ([]float64, func()) {
	t.Helper()
	x, free := guarded(t, 2*n, atEnd)
	return unsafe.Slice((*float64)(unsafe.Pointer(unsafe.SliceData(x))), n), free
}

// TestF64KernelsGuarded runs the float64 binary kernels (binaryVecF64,
// every function and form), the affine one (affineF64) and the sum of
// squares (sumSqF64, AVX2) with operands
// and the output against inaccessible pages, before and after, at every
// length from 1 to 40 (tails of 1 to 3 lanes on AVX2, 1 to 7 on
// AVX-512) and at every kernel level this CPU has, against float64 Go
// arithmetic: a masked lane read or written past n faults.
func TestF64KernelsGuarded(t *testing.T) {
	rng := rand.New(rand.NewPCG(93, 94))
	for _, lv := range asmLevels() {
		withLevel(lv, func() {
			for n := 1; n <= 40; n++ {
				for _, atEnd := range []bool{true, false} {
					a, freeA := guardedF64(t, n, atEnd)
					b, freeB := guardedF64(t, n, atEnd)
					y, freeY := guardedF64(t, n, atEnd)
					for i := range a {
						a[i], b[i] = rng.Float64()*4-2, rng.Float64()*4-2
					}
					for _, fn := range []rt.BinaryFn{rt.Add, rt.Sub, rt.Mul, rt.Div} {
						for form := formVV; form <= formSV; form++ {
							if !binaryVecF64(fn, form, y, a, b) {
								t.Fatalf("%s: no f64 kernel for %s form %d", levelNames[lv], fn, form)
							}
							for i := range y {
								av, bv := a[i], b[i]
								switch form {
								case formVS:
									bv = b[0]
								case formSV:
									av = a[0]
								}
								var want float64
								switch fn {
								case rt.Add:
									want = av + bv
								case rt.Sub:
									want = av - bv
								case rt.Mul:
									want = av * bv
								case rt.Div:
									want = av / bv
								}
								if y[i] != want {
									t.Fatalf("%s %s form %d n=%d atEnd %v [%d]: %v, want %v", levelNames[lv], fn, form, n, atEnd, i, y[i], want)
								}
							}
						}
					}
					alpha, beta := rng.Float64()*2-1, rng.Float64()*2-1
					if !affineF64(y, a, alpha, beta) {
						t.Fatalf("%s: no f64 affine kernel", levelNames[lv])
					}
					for i := range y {
						if want := alpha*a[i] + beta; y[i] != want && !math.IsNaN(want) {
							t.Fatalf("%s affine n=%d atEnd %v [%d]: %v, want %v", levelNames[lv], n, atEnd, i, y[i], want)
						}
					}
					if lv == levelAVX2 {
						got, ok := sumSqF64(a)
						want := 0.0
						for _, v := range a {
							want += v * v
						}
						if !ok || math.Abs(got-want) > 1e-14*want*float64(n) {
							t.Fatalf("%s sumSqF64 n=%d atEnd %v: %v (%v), want %v", levelNames[lv], n, atEnd, got, ok, want)
						}
					}
					freeA()
					freeB()
					freeY()
				}
			}
		})
	}
}

// BenchmarkF64Kernels times the float64 kernels on one thread, in cache
// (n = 4095: a tail of 3 lanes on AVX2, 7 on AVX-512): binaryVecF64's Add
// (form VV) and affineF64, at the CPU's kernel level and, /go, in the Go
// loops that run without them.
func BenchmarkF64Kernels(b *testing.B) {
	const n = 4095
	x, y, d := make([]float64, n), make([]float64, n), make([]float64, n)
	for i := range x {
		x[i], y[i] = float64(i%7)-3, float64(i%5)-2
	}
	for _, lv := range []int{hwKernelLevel(), levelGo} {
		name := levelNames[lv]
		withLevel(lv, func() {
			b.Run("add/"+name, func(b *testing.B) {
				b.SetBytes(3 * 8 * n)
				for b.Loop() {
					if !binaryVecF64(rt.Add, formVV, d, x, y) {
						binVecVec(rt.Add, x, y, d)
					}
				}
			})
			b.Run("affine/"+name, func(b *testing.B) {
				b.SetBytes(2 * 8 * n)
				for b.Loop() {
					if !affineF64(d, x, 0.5, 0.25) {
						for i, v := range x {
							d[i] = 0.5*v + 0.25
						}
					}
				}
			})
		})
	}
}
