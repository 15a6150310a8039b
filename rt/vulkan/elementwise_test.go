//go:build cgo

package vulkan

import (
	"math"
	"math/rand"
	"testing"

	"github.com/vrun-go/vrun/internal/backendtest"
	"github.com/vrun-go/vrun/rt"
)

var allDTypes = []rt.DType{rt.F32, rt.F16, rt.F64, rt.I32, rt.I64, rt.U8, rt.Bool, rt.I8}
var floatDTypes = []rt.DType{rt.F32, rt.F16, rt.F64}

func TestFill(t *testing.T) {
	d := testDevice(t)
	for _, dt := range allDTypes {
		// strided: every other column of a [7, 2*33] buffer
		b := newBuf(t, d, dt, 7*66, make([]float64, 7*66))
		op := &rt.Fill{Y: b.ref([]int{7, 33}, []int{66, 2}), Value: 3}
		if !supported(t, d, op) {
			continue
		}
		backendtest.Run(t, d, op)
		got := b.read(t, d)
		for i, v := range got {
			want := 0.0
			if i%2 == 0 {
				want = 3
				if dt == rt.Bool {
					want = 1
				}
			}
			if v != want {
				t.Fatalf("%s: [%d] = %v, want %v", dt, i, v, want)
			}
		}
	}
}

// unaryRange picks inputs inside the function's domain.
func unaryRange(f rt.UnaryFn) (float64, float64) {
	switch f {
	case rt.Log, rt.Sqrt, rt.Rsqrt:
		return 0.1, 4
	case rt.Exp:
		return -5, 5
	}
	return -3, 3
}

func TestUnary(t *testing.T) {
	d := testDevice(t)
	r := rand.New(rand.NewSource(1))
	shape := []int{7, 33}
	for _, dt := range append(floatDTypes, rt.I32, rt.I64, rt.U8, rt.I8, rt.Bool) {
		for f := rt.UnaryFn(0); int(f) < rt.NumUnaryFns; f++ {
			lo, hi := unaryRange(f)
			in := randVals(r, dt, 7*33, lo, hi)
			x := newBuf(t, d, dt, 7*33, in)
			y := newBuf(t, d, dt, 7*33, nil)
			// X is read transposed: X view [7,33] with strides [1,7].
			alpha, beta := 0.7, 1.3
			if f == rt.Clip {
				alpha, beta = -1, 1.5
			}
			op := &rt.Unary{Fn: f, Alpha: alpha, Beta: beta, X: x.ref(shape, []int{1, 7}), Y: y.ref(shape, nil)}
			if err := d.Supports(op); err != nil {
				if isFloat(dt) || (f != rt.Not && intUnary[f] && dt != rt.Bool) {
					t.Errorf("%s %s: %v", dt, f, err)
				}
				continue
			}
			backendtest.Run(t, d, op)
			got := y.read(t, d)
			want := make([]float64, len(got))
			backendtest.ForEach(shape, func(idx []int) {
				xv := in[backendtest.Offset(idx, []int{1, 7})]
				w := f.Apply(xv, alpha, beta)
				if !isFloat(dt) {
					w = math.Round(w)
					if f == rt.Clip {
						w = f.Apply(xv, math.Round(alpha), math.Round(beta))
					}
				}
				want[backendtest.Offset(idx, []int{33, 1})] = representable(dt, w)
			})
			compare(t, dt.String()+" "+f.String(), got, want, tolFor(dt))
		}
	}
}

func TestCast(t *testing.T) {
	d := testDevice(t)
	r := rand.New(rand.NewSource(2))
	for _, x := range allDTypes {
		for _, y := range allDTypes {
			in := randVals(r, x, 65, -100, 100)
			if x == rt.F16 || x == rt.F32 || x == rt.F64 {
				// keep float -> u8 inside the target range
				if y == rt.U8 {
					for i := range in {
						in[i] = math.Abs(in[i])
					}
				}
				if y == rt.I8 {
					for i := range in {
						in[i] = math.Max(-120, math.Min(120, in[i]))
					}
				}
			}
			if x == rt.I32 || x == rt.I64 {
				for i := range in {
					if y == rt.U8 {
						in[i] = math.Abs(in[i])
					}
				}
			}
			xb := newBuf(t, d, x, 65, in)
			yb := newBuf(t, d, y, 65, nil)
			op := &rt.Unary{Fn: rt.Copy, X: xb.ref([]int{65}, nil), Y: yb.ref([]int{65}, nil)}
			if !supported(t, d, op) {
				continue
			}
			backendtest.Run(t, d, op)
			got := yb.read(t, d)
			want := make([]float64, 65)
			for i, v := range in {
				switch {
				case y == rt.Bool:
					if v != 0 {
						want[i] = 1
					}
				case y.IsInt():
					want[i] = representable(y, math.Trunc(v))
				default:
					want[i] = representable(y, v)
				}
			}
			compare(t, "cast "+x.String()+"->"+y.String(), got, want, tolFor(y))
		}
	}
}

func TestBinary(t *testing.T) {
	d := testDevice(t)
	r := rand.New(rand.NewSource(3))
	// A [5, 1, 33] broadcast against B [1, 7, 33] -> Y [5, 7, 33]
	shape := []int{5, 7, 33}
	aSt := []int{33, 0, 1}
	bSt := []int{0, 33, 1}
	for _, dt := range allDTypes {
		for f := rt.BinaryFn(0); int(f) < rt.NumBinaryFns; f++ {
			lo, hi := -3.0, 3.0
			if f == rt.Pow && isFloat(dt) {
				lo = 0.2
			}
			a := randVals(r, dt, 5*33, lo, hi)
			bv := randVals(r, dt, 7*33, -3, 3)
			if f == rt.Pow && !isFloat(dt) {
				for i := range bv {
					bv[i] = float64(i % 4)
				}
				for i := range a {
					a[i] = math.Max(-5, math.Min(5, a[i]))
				}
			}
			yd := dt
			if f.IsCompare() || f.IsLogical() {
				yd = rt.Bool
			}
			ab := newBuf(t, d, dt, 5*33, a)
			bb := newBuf(t, d, dt, 7*33, bv)
			yb := newBuf(t, d, yd, 5*7*33, nil)
			op := &rt.Binary{Fn: f, A: ab.ref(shape, aSt), B: bb.ref(shape, bSt), Y: yb.ref(shape, nil)}
			if err := d.Supports(op); err != nil {
				if isFloat(dt) && !f.IsLogical() {
					t.Errorf("%s %s: %v", dt, f, err)
				}
				continue
			}
			backendtest.Run(t, d, op)
			got := yb.read(t, d)
			want := make([]float64, len(got))
			backendtest.ForEach(shape, func(idx []int) {
				x, y := a[backendtest.Offset(idx, aSt)], bv[backendtest.Offset(idx, bSt)]
				w := f.Apply(x, y)
				if !isFloat(dt) && yd == dt {
					switch f {
					case rt.Div:
						w = math.Trunc(x / y)
					case rt.Mod:
						w = x - math.Floor(x/y)*y
					}
				}
				want[backendtest.Offset(idx, []int{7 * 33, 33, 1})] = representable(yd, w)
			})
			tol := tolFor(yd)
			if f == rt.Pow && dt == rt.F32 {
				tol = 2e-5
			}
			compare(t, dt.String()+" "+f.String(), got, want, tol)
		}
	}
}

func TestWhere(t *testing.T) {
	d := testDevice(t)
	r := rand.New(rand.NewSource(4))
	shape := []int{3, 5, 33}
	for _, dt := range allDTypes {
		c := randVals(r, rt.Bool, 5*33, 0, 1)
		a := randVals(r, dt, 3*5*33, -5, 5)
		b := randVals(r, dt, 33, -5, 5)
		cb := newBuf(t, d, rt.Bool, 5*33, c)
		ab := newBuf(t, d, dt, 3*5*33, a)
		bb := newBuf(t, d, dt, 33, b)
		yb := newBuf(t, d, dt, 3*5*33, nil)
		op := &rt.Where{Cond: cb.ref(shape, []int{0, 33, 1}), A: ab.ref(shape, nil), B: bb.ref(shape, []int{0, 0, 1}), Y: yb.ref(shape, nil)}
		if !supported(t, d, op) {
			continue
		}
		backendtest.Run(t, d, op)
		got := yb.read(t, d)
		want := make([]float64, len(got))
		backendtest.ForEach(shape, func(idx []int) {
			o := backendtest.Offset(idx, []int{165, 33, 1})
			if c[backendtest.Offset(idx, []int{0, 33, 1})] != 0 {
				want[o] = a[o]
			} else {
				want[o] = b[idx[2]]
			}
		})
		compare(t, "where "+dt.String(), got, want, 0)
	}
}

func TestCoalesceRankError(t *testing.T) {
	d := testDevice(t)
	// rank-7 view with a non-mergeable stride pattern
	shape := []int{2, 2, 2, 2, 2, 2, 2}
	st := []int{2, 8, 32, 128, 512, 1, 1024}
	x := newBuf(t, d, rt.F32, 1708, nil)
	y := newBuf(t, d, rt.F32, 128, nil)
	op := &rt.Unary{Fn: rt.Copy, X: x.ref(shape, st), Y: y.ref(shape, nil)}
	if err := d.Supports(op); err == nil {
		t.Fatal("rank-7 strided copy accepted")
	} else {
		t.Log(err)
	}
}
