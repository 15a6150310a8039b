//go:build cgo

package vulkan

import (
	"fmt"
	"math"
	"math/rand"
	"strings"
	"testing"

	"github.com/vrun-go/vrun/internal/backendtest"
	"github.com/vrun-go/vrun/rt"
)

// softmaxRef is softmax (or log-softmax) of each row of n of xs in
// float64.
func softmaxRef(xs []float64, n int, lg bool) []float64 {
	want := make([]float64, len(xs))
	for o := 0; o < len(xs)/n; o++ {
		row := xs[o*n : (o+1)*n]
		m := math.Inf(-1)
		for _, x := range row {
			m = math.Max(m, x)
		}
		s := 0.0
		for _, x := range row {
			s += math.Exp(x - m)
		}
		for k, x := range row {
			if lg {
				want[o*n+k] = x - m - math.Log(s)
			} else {
				want[o*n+k] = math.Exp(x-m) / s
			}
		}
	}
	return want
}

// layerNormRef normalizes each row of n of xs in float64 (scale and
// bias when not nil).
func layerNormRef(xs []float64, n int, sc, bi []float64, eps float64) []float64 {
	want := make([]float64, len(xs))
	for o := 0; o < len(xs)/n; o++ {
		row := xs[o*n : (o+1)*n]
		mean, v := 0.0, 0.0
		for _, x := range row {
			mean += x
		}
		mean /= float64(n)
		for _, x := range row {
			v += (x - mean) * (x - mean)
		}
		v /= float64(n)
		for k, x := range row {
			y := (x - mean) / math.Sqrt(v+eps)
			if sc != nil {
				y = y*sc[k] + bi[k]
			}
			want[o*n+k] = y
		}
	}
	return want
}

// TestVecRows checks softmax.comp and normalize.comp's VROWS variants
// (rows of a multiple of 4 items as 4-item vectors, teams of 1 to a
// subgroup's lanes per row, or a workgroup) against float64 references:
// every lane count the device allows on each row length, odd row counts
// (teams left idle), and views at element offsets that are not multiples
// of 4 (the older kernels run those).
func TestVecRows(t *testing.T) {
	d := testDevice(t)
	dev := d.(*device)
	defer func() { vrowForceLanes = 0 }()
	r := rand.New(rand.NewSource(17))
	ns := int(dev.phys.caps.subgroupSize)
	vec := dev.hasSubgroupArith() && dev.phys.caps.subgroupOps&sgShuffle != 0
	t.Logf("subgroup size %d, VROWS variants %v", ns, vec)
	rowWG := (&lowering{d: dev}).rowWG(vrowWG) // a whole workgroup's row
	lanes := []int{0, wgSize}
	for l := 1; l <= ns; l *= 2 {
		lanes = append(lanes, l)
	}
	for _, dt := range []rt.DType{rt.F32, rt.F16} {
		for _, n := range []int{4, 12, 128, 132, 768, 1024, 2052, 8192, 8196, 16384, 16388} {
			for _, off := range []int{0, 4, 2} {
				for _, force := range lanes {
					if force != 0 && (off != 0 || (force != wgSize && n/4 > force*vrowVectors)) {
						continue
					}
					vrowForceLanes = force
					rows := 37
					if n >= 2048 {
						rows = 3
					}
					what := fmt.Sprintf("%s n=%d off=%d lanes=%d", dt, n, off, force)
					wantVec := vec && off%4 == 0 && n <= rowWG*vrowVectors*4
					xs := randVals(r, dt, off+rows*n, -4, 4)
					xb := newBuf(t, d, dt, len(xs), xs)
					xr := xb.ref([]int{rows * n}, nil)
					xr.Off += int64(off * dt.Size())
					check := func(op rt.Op, yb *tbuf, prefix string, want []float64, tol float64) {
						t.Helper()
						if !supported(t, d, op) {
							return
						}
						ds, err := dev.lower(op)
						if err != nil {
							t.Fatal(err)
						}
						if got := strings.HasPrefix(ds[0].shader, prefix); got != wantVec {
							t.Errorf("%s: shader %s, want VROWS %v", what, ds[0].shader, wantVec)
						}
						backendtest.Run(t, d, op)
						compare(t, prefix+what, yb.read(t, d), want, tol)
					}
					for _, lg := range []bool{false, true} {
						yb := newBuf(t, d, dt, rows*n, nil)
						op := &rt.Softmax{X: xr, Y: yb.ref([]int{rows * n}, nil), Outer: rows, N: n, Inner: 1, Log: lg}
						check(op, yb, "softmaxv_", softmaxRef(xs[off:], n, lg), tolFor(dt))
					}
					sc, bi := randVals(r, dt, n, 0.5, 2), randVals(r, dt, n, -1, 1)
					for _, affine := range []bool{false, true} {
						yb := newBuf(t, d, dt, rows*n, nil)
						op := &rt.Normalize{X: xr, Y: yb.ref([]int{rows * n}, nil), Outer: rows, N: n, Eps: 1e-5}
						want := layerNormRef(xs[off:], n, nil, nil, 1e-5)
						if affine {
							op.Scale = newBuf(t, d, dt, n, sc).ref([]int{n}, nil)
							op.Bias = newBuf(t, d, dt, n, bi).ref([]int{n}, nil)
							want = layerNormRef(xs[off:], n, sc, bi, 1e-5)
						}
						tol := tolFor(dt)
						if dt == rt.F32 {
							tol = 2e-5
						}
						check(op, yb, "normalizev_", want, tol)
					}
				}
			}
		}
	}
}

// TestVecReduce checks reduce.comp's VROWS variants (contiguous rows to
// a team of lanes; every float function but LogSumExp and the Arg ones)
// against float64 references (reduceRef): 4-item vector loads for rows of
// a multiple of 4 items at offsets that are multiples of 4, scalar ones
// (push word 7 = 1) for other lengths (49 and 169: a global average
// pool's 7×7 and 13×13) and offsets, on every lane count the device
// allows and odd row counts; LogSumExp stays on the older kernel.
func TestVecReduce(t *testing.T) {
	d := testDevice(t)
	dev := d.(*device)
	defer func() { vrowForceLanes = 0 }()
	r := rand.New(rand.NewSource(18))
	ns := int(dev.phys.caps.subgroupSize)
	vec := dev.hasSubgroupArith() && dev.phys.caps.subgroupOps&sgShuffle != 0
	lanes := []int{0, wgSize}
	for l := 1; l <= ns; l *= 2 {
		lanes = append(lanes, l)
	}
	for _, dt := range []rt.DType{rt.F32, rt.F16} {
		for f := rt.Sum; f <= rt.LogSumExp; f++ {
			for _, n := range []int{4, 12, 49, 132, 169, 1027, 1028, 8192, 20000, 20001} {
				for _, off := range []int{0, 4, 2} {
					scalar := n%4 != 0 || off%4 != 0
					items := n / 4
					if scalar {
						items = n
					}
					for _, force := range lanes {
						if force != 0 && force != wgSize && items > force*reduceMost {
							continue
						}
						vrowForceLanes = force
						rows := 37
						if n >= 8192 {
							rows = 3
						}
						lo, hi := -2.0, 2.0
						if f == rt.Prod {
							lo, hi = 0.99, 1.01
						}
						xs := randVals(r, dt, off+rows*n, lo, hi)
						xb := newBuf(t, d, dt, len(xs), xs)
						xr := xb.ref([]int{rows * n}, nil)
						xr.Off += int64(off * dt.Size())
						yb := newBuf(t, d, dt, rows, nil)
						op := &rt.Reduce{Fn: f, X: xr, Y: yb.ref([]int{rows}, nil), Outer: rows, N: n, Inner: 1}
						what := fmt.Sprintf("%s %s n=%d off=%d lanes=%d", dt, f, n, off, force)
						ds, err := dev.lower(op)
						if err != nil {
							t.Fatal(err)
						}
						wantVec := vec && f != rt.LogSumExp
						if got := strings.HasPrefix(ds[0].shader, "reducev_"); got != wantVec {
							t.Errorf("%s: shader %s, want VROWS %v", what, ds[0].shader, wantVec)
						} else if got && (ds[0].push[7] == 1) != scalar {
							t.Errorf("%s: mode %d, want scalar loads %v", what, ds[0].push[7], scalar)
						}
						backendtest.Run(t, d, op)
						want := make([]float64, rows)
						for o := range want {
							want[o] = representable(dt, reduceRef(f, xs[off+o*n:off+(o+1)*n], false))
						}
						tol := 2e-5
						if dt == rt.F16 {
							tol = 4e-3
						}
						if f == rt.Sum || f == rt.Mean {
							// sums of ±2: relative to the sum of |x|
							tol *= 4
						}
						compare(t, what, yb.read(t, d), want, tol)
					}
				}
			}
		}
	}
}
