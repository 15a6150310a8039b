package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/vrun-go/vrun/rt"
)

// ewLevels returns the kernel levels this machine runs, portable Go first.
func ewLevels() []int {
	lv := []int{levelGo}
	for l := levelAVX2; l <= hwKernelLevel(); l++ {
		lv = append(lv, l)
	}
	return lv
}

// withLevel runs f with the kernels capped at level lv.
func withLevel(lv int, f func()) {
	old, oldAsm := maxKernelLevel, useAsm
	defer func() { maxKernelLevel, useAsm = old, oldAsm }()
	maxKernelLevel, useAsm = lv, lv > levelGo
	f()
}

var levelNames = map[int]string{levelGo: "go", levelAVX2: "avx2", levelAVX512: "avx512"}

// ulpDiff is |got - want| in units of the float32 spacing at want (the
// smallest subnormal below the normal range); 0 when both are the same
// NaN class or equal infinities.
func ulpDiff(got, want float32) float64 {
	if want != want || got != got {
		if want != want && got != got {
			return 0
		}
		return math.Inf(1)
	}
	if math.IsInf(float64(want), 0) || math.IsInf(float64(got), 0) {
		if got == want {
			return 0
		}
		return math.Inf(1)
	}
	w := math.Abs(float64(want))
	ulp := float64(math.Nextafter32(float32(w), float32(math.Inf(1)))) - w
	return math.Abs(float64(got)-float64(want)) / ulp
}

// f32Inputs covers every exponent from 2^-40 to 2^7 with random
// mantissas, both signs, and the special values.
func f32Inputs() []float32 {
	rng := rand.New(rand.NewPCG(3, 4))
	xs := []float32{0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()),
		1e-45, -1e-45, 88.72, 88.73, 88.8, 89, -87.3, -87.4, -103.9, -104, -200, 1000, -1000, 0.625, -0.625,
		math.Nextafter32(0.625, 0), -math.Nextafter32(0.625, 0), 9, -9, 20, -20, 0.5, -0.5}
	for e := -40; e <= 7; e++ {
		for range 3000 {
			m := 1 + rng.Float64()
			v := float32(math.Ldexp(m, e))
			xs = append(xs, v, -v)
		}
	}
	return xs
}

func sigmoid64(x float64) float64 {
	if x >= 0 {
		return 1 / (1 + math.Exp(-x))
	}
	e := math.Exp(x)
	return e / (1 + e)
}

// TestF32TranscendentalULP checks the float32 exp, tanh, sigmoid and silu
// of every kernel level against float64 math rounded to float32, within
// the bounds ewf32.go states.
func TestF32TranscendentalULP(t *testing.T) {
	xs := f32Inputs()
	cases := []struct {
		fn    rt.UnaryFn
		ref   func(float64) float64
		bound float64
	}{
		{rt.Exp, math.Exp, 2},
		{rt.Tanh, math.Tanh, 3},
		{rt.Sigmoid, sigmoid64, 3},
		{rt.Silu, func(x float64) float64 { return x * sigmoid64(x) }, 4},
		{rt.Erf, math.Erf, 3},
		{rt.Gelu, func(x float64) float64 { return 0.5 * x * math.Erfc(-x/math.Sqrt2) }, 16},
	}
	for _, lv := range ewLevels() {
		for _, c := range cases {
			t.Run(fmt.Sprintf("%s/%s", levelNames[lv], c.fn), func(t *testing.T) {
				y := make([]float32, len(xs))
				withLevel(lv, func() {
					if !unaryF32(c.fn, 0, 0, y, xs) {
						t.Fatalf("no float32 kernel for %s", c.fn)
					}
				})
				worst, wi := 0.0, 0
				for i, x := range xs {
					want64 := c.ref(float64(x))
					want := float32(want64)
					if c.fn == rt.Silu && sigmoid64(float64(x)) < 0x1p-126 {
						// x·sigmoid(x) where sigmoid(x) is subnormal: stated
						// as an absolute error of 2 subnormal steps times |x|.
						if e := math.Abs(float64(y[i]) - want64); e > 2*0x1p-149*math.Abs(float64(x)) {
							t.Errorf("silu(%g) = %g, want %g", x, y[i], want64)
						}
						continue
					}
					if c.fn == rt.Gelu && math.Abs(want64) < 0x1p-126 {
						// Subnormal results (x < -13): an absolute bound.
						if e := math.Abs(float64(y[i]) - want64); e > 0x1p-139 {
							t.Errorf("gelu(%g) = %g, want %g", x, y[i], want64)
						}
						continue
					}
					if d := ulpDiff(y[i], want); d > worst {
						worst, wi = d, i
					}
				}
				t.Logf("max error %.2f ULP at x = %g (got %g, want %g)", worst, xs[wi], y[wi], float32(c.ref(float64(xs[wi]))))
				if worst > c.bound {
					t.Errorf("error %.2f ULP > %v at x = %g: got %g, want %g", worst, c.bound, xs[wi], y[wi], float32(c.ref(float64(xs[wi]))))
				}
			})
		}
	}
}

// TestF32LevelsAgree: the assembly kernels compute the same functions as
// the scalar Go code (bit for bit for the exact ones) at every length,
// which exercises the padded tail, in place and out of place.
func TestF32LevelsAgree(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	exact := map[rt.UnaryFn]func(x, alpha float32) float32{
		rt.Relu: func(x, _ float32) float32 {
			if x < 0 {
				return 0
			}
			return x
		},
		rt.LeakyRelu: func(x, a float32) float32 {
			if x < 0 {
				return a * x
			}
			return x
		},
		rt.Neg:        func(x, _ float32) float32 { return -x },
		rt.Abs:        func(x, _ float32) float32 { return float32(math.Abs(float64(x))) },
		rt.Square:     func(x, _ float32) float32 { return x * x },
		rt.Sqrt:       func(x, _ float32) float32 { return float32(math.Sqrt(float64(x))) },
		rt.Reciprocal: func(x, _ float32) float32 { return 1 / x },
	}
	for _, lv := range ewLevels()[1:] {
		for n := 0; n <= 70; n++ {
			x := make([]float32, n)
			for i := range x {
				x[i] = float32(rng.NormFloat64() * 3)
				if i%11 == 3 {
					x[i] = float32(math.NaN())
				}
				if i%13 == 5 {
					x[i] = float32(math.Copysign(0, -1))
				}
			}
			for fn, f := range exact {
				guard := make([]float32, n+20)
				for i := range guard {
					guard[i] = 42
				}
				y := guard[:n]
				withLevel(lv, func() { unaryF32(fn, 0.1, 0, y, x) })
				for i := n; i < len(guard); i++ {
					if guard[i] != 42 {
						t.Fatalf("%s %s n=%d: element %d beyond the end written", levelNames[lv], fn, n, i)
					}
				}
				for i := range x {
					want := f(x[i], 0.1)
					if math.Float32bits(y[i]) != math.Float32bits(want) && !(want != want && y[i] != y[i]) &&
						!(fn == rt.Abs && y[i] == want) {
						t.Fatalf("%s %s n=%d [%d]: f(%v) = %v, want %v", levelNames[lv], fn, n, i, x[i], y[i], want)
					}
				}
			}
			// In place, against the Go level.
			for _, fn := range []rt.UnaryFn{rt.Exp, rt.Tanh, rt.Sigmoid, rt.Silu, rt.Erf, rt.Gelu} {
				y := append([]float32(nil), x...)
				withLevel(lv, func() { unaryF32(fn, 0, 0, y, y) })
				want := make([]float32, n)
				unaryF32Go(fn, want, x)
				for i := range x {
					bound := 4.0
					if fn == rt.Gelu {
						bound = 16 // 1 - erf(a) cancels for x in (-√2, 0)
					}
					if d := ulpDiff(y[i], want[i]); d > bound {
						t.Fatalf("%s %s n=%d [%d]: f(%v) = %v, Go %v", levelNames[lv], fn, n, i, x[i], y[i], want[i])
					}
				}
			}
		}
	}
}

// TestF32Binary checks the vectorised binary kernels in every form and
// length against the Go loops (fmax/fmin semantics included).
func TestF32Binary(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	special := []float32{float32(math.NaN()), 0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)), 1, -1}
	for _, lv := range ewLevels()[1:] {
		for _, fn := range []rt.BinaryFn{rt.Add, rt.Sub, rt.Mul, rt.Div, rt.Max, rt.Min} {
			for n := 0; n <= 80; n++ {
				a, b := make([]float32, n), make([]float32, n)
				for i := range a {
					a[i], b[i] = float32(rng.NormFloat64()), float32(rng.NormFloat64())
					if i%5 == 1 {
						a[i] = special[rng.IntN(len(special))]
					}
					if i%7 == 2 {
						b[i] = special[rng.IntN(len(special))]
					}
				}
				sa, sb := []float32{special[n%len(special)]}, []float32{special[(n+3)%len(special)]}
				for form, ab := range [][2][]float32{{a, b}, {a, sb}, {sa, b}} {
					guard := make([]float32, n+20)
					for i := range guard {
						guard[i] = 42
					}
					y := guard[:n]
					ok := false
					withLevel(lv, func() { ok = binaryF32(fn, form, y, ab[0], ab[1]) })
					for i := n; i < len(guard); i++ {
						if guard[i] != 42 {
							t.Fatalf("%s %s form %d n=%d: element %d beyond the end written", levelNames[lv], fn, form, n, i)
						}
					}
					if !ok {
						t.Fatalf("%s %s: no kernel", levelNames[lv], fn)
					}
					want := make([]float32, n)
					switch form {
					case formVV:
						binVecVec(fn, a, b, want)
					case formVS:
						binVecScalar(fn, a, sb[0], want)
					case formSV:
						binScalarVec(fn, sa[0], b, want)
					}
					for i := range want {
						if math.Float32bits(y[i]) != math.Float32bits(want[i]) && !(want[i] != want[i] && y[i] != y[i]) {
							t.Fatalf("%s %s form %d n=%d [%d]: got %v, want %v", levelNames[lv], fn, form, n, i, y[i], want[i])
						}
					}
				}
			}
		}
	}
}

// TestF32RowKernels checks the row kernels (sum, max, exp-shift-sum, sum
// of squared deviations, normalisation) of every vector level at every
// length up to 70 against float64 loops, and that nothing beyond the row
// is written.
func TestF32RowKernels(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for _, lv := range ewLevels()[1:] {
		withLevel(lv, func() {
			for n := 0; n <= 70; n++ {
				x := make([]float32, n)
				sc, bi := make([]float32, n), make([]float32, n)
				for i := range x {
					x[i] = float32(rng.NormFloat64()*3 - 5)
					sc[i], bi[i] = float32(rng.NormFloat64()), float32(rng.NormFloat64())
				}
				name := fmt.Sprintf("%s n=%d", levelNames[lv], n)
				var s, m, sq float64
				m = math.Inf(-1)
				for _, v := range x {
					s += float64(v)
					m = math.Max(m, float64(v))
				}
				mean := float32(s / float64(max(n, 1)))
				for _, v := range x {
					sq += (float64(v) - float64(mean)) * (float64(v) - float64(mean))
				}
				if got, ok := sumF32(x); !ok || math.Abs(float64(got)-s) > 1e-5*(1+math.Abs(s))*float64(n+1) {
					t.Errorf("%s: sum %v, want %v", name, got, s)
				}
				if got, _ := sumSqDevF32(x, mean); math.Abs(float64(got)-sq) > 1e-5*(1+sq) {
					t.Errorf("%s: sum of squared deviations %v, want %v", name, got, sq)
				}
				if n > 0 {
					if got, _ := maxF32(x); float64(got) != m {
						t.Errorf("%s: max %v, want %v", name, got, m)
					}
					xn := append([]float32(nil), x...)
					xn[rng.IntN(n)] = float32(math.NaN())
					if got, _ := maxF32(xn); got == got {
						t.Errorf("%s: max with a NaN = %v", name, got)
					}
				}
				guard := make([]float32, n+20)
				for i := range guard {
					guard[i] = 42
				}
				y := guard[:n]
				shift := float32(m)
				got, _ := expShiftSumF32(y, x, shift)
				es := 0.0
				for i, v := range x {
					// The kernel rounds x - shift to float32 first.
					want := math.Exp(float64(v - shift))
					es += want
					if d := ulpDiff(y[i], float32(want)); d > 3 {
						t.Fatalf("%s: exp(x-shift)[%d] = %v, want %v", name, i, y[i], want)
					}
				}
				if math.Abs(float64(got)-es) > 1e-5*(1+es) {
					t.Errorf("%s: exp sum %v, want %v", name, got, es)
				}
				inv := float32(0.7)
				normApplyF32(y, x, sc, bi, mean, inv)
				for i, v := range x {
					want := (float64(v)-float64(mean))*float64(inv)*float64(sc[i]) + float64(bi[i])
					if math.Abs(float64(y[i])-want) > 1e-5*(1+math.Abs(want)) {
						t.Fatalf("%s: norm[%d] = %v, want %v", name, i, y[i], want)
					}
				}
				for i := n; i < len(guard); i++ {
					if guard[i] != 42 {
						t.Fatalf("%s: element %d beyond the row written", name, i)
					}
				}
			}
		})
	}
}

// TestActClipF32: the f32 Clip activation (max then min with the binary
// kernels) at every level against the float64 formula, NaN kept, with
// bounds that float32 does not represent.
func TestActClipF32(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, lv := range ewLevels() {
		for _, b := range [][2]float64{{0, 6}, {-0.5, 0.5}, {0.1, 0.7}, {-1e-3, math.Inf(1)}} {
			for n := 0; n <= 70; n++ {
				x := make([]float32, n)
				for i := range x {
					x[i] = float32(rng.NormFloat64() * 4)
					switch i % 17 {
					case 3:
						x[i] = float32(math.NaN())
					case 5:
						x[i] = float32(math.Copysign(0, -1))
					case 7:
						x[i] = float32(b[0])
					}
				}
				guard := make([]float32, n+20)
				for i := range guard {
					guard[i] = 42
				}
				y := guard[:n]
				copy(y, x)
				withLevel(lv, func() { actApply(rt.Clip, b[0], b[1], y) })
				for i := n; i < len(guard); i++ {
					if guard[i] != 42 {
						t.Fatalf("%s clip n=%d: element %d beyond the end written", levelNames[lv], n, i)
					}
				}
				for i, v := range x {
					want := float32(math.Min(math.Max(float64(v), b[0]), b[1]))
					if y[i] != want && !(want != want && y[i] != y[i]) {
						t.Fatalf("%s clip%v n=%d [%d]: f(%v) = %v, want %v", levelNames[lv], b, n, i, v, y[i], want)
					}
				}
			}
		}
	}
}
