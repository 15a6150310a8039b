package cpu

import (
	"math"
	"unsafe"

	"github.com/vrun-go/vrun/rt"
)

// actApply applies fn in place to every element of y. It is the unary
// kernel for contiguous float data and the fused epilogue of MatMul and
// Conv. For float32 the vectorised kernels (unaryF32) take the functions
// they have, the transcendental ones computed in float32 within the
// bounds of ewf32.go; the rest is computed in T, or in float64 and
// rounded, which matches rt.UnaryFn.Apply to the precision of T.
func actApply[T floatT](fn rt.UnaryFn, alpha, beta float64, y []T) {
	if fn == rt.Copy {
		return
	}
	if y32, ok := asF32(y); ok && unaryF32(fn, alpha, beta, y32, y32) {
		return
	}
	if y32, ok := asF32(y); ok && fn == rt.Clip {
		// max(x, lo) then min(·, hi) with the vectorised binary kernels (NaN
		// kept, as below); clamping to the float32 bounds is the same as
		// clamping to the float64 ones and rounding.
		lo, hi := [1]float32{float32(alpha)}, [1]float32{float32(beta)}
		if binaryF32(rt.Max, formVS, y32, y32, lo[:]) && binaryF32(rt.Min, formVS, y32, y32, hi[:]) {
			return
		}
	}
	if signedInPlace(fn, y) {
		return
	}
	switch fn {
	case rt.LeakyRelu:
		a := T(alpha)
		for i, v := range y {
			if v < 0 {
				y[i] = a * v
			}
		}
	case rt.Affine:
		for i, v := range y {
			y[i] = T(alpha*float64(v) + beta)
		}
	case rt.Clip:
		for i, v := range y {
			y[i] = T(math.Min(math.Max(float64(v), alpha), beta))
		}
	case rt.Sigmoid:
		for i, v := range y {
			y[i] = T(sigmoid(float64(v)))
		}
	case rt.Silu:
		for i, v := range y {
			x := float64(v)
			y[i] = T(x * sigmoid(x))
		}
	case rt.Tanh:
		for i, v := range y {
			y[i] = T(math.Tanh(float64(v)))
		}
	case rt.Gelu:
		for i, v := range y {
			x := float64(v)
			y[i] = T(0.5 * x * (1 + math.Erf(x*(1/math.Sqrt2))))
		}
	case rt.HardSigmoid:
		for i, v := range y {
			y[i] = T(math.Max(0, math.Min(1, alpha*float64(v)+beta)))
		}
	case rt.HardSwish:
		for i, v := range y {
			x := float64(v)
			y[i] = T(x * math.Max(0, math.Min(1, x/6+0.5)))
		}
	case rt.Exp:
		for i, v := range y {
			y[i] = T(math.Exp(float64(v)))
		}
	case rt.Sqrt:
		for i, v := range y {
			y[i] = T(math.Sqrt(float64(v)))
		}
	default:
		for i, v := range y {
			y[i] = T(fn.Apply(float64(v), alpha, beta))
		}
	}
}

// asF32 views y as []float32 when T is float32.
// byFloat runs a kernel's f64 instance when dt is F64 and its f32 one
// otherwise (the op was validated, so f32 is the only other float there).
func byFloat[O any](dt rt.DType, o O, f64, f32 func(O)) {
	if dt == rt.F64 {
		f64(o)
	} else {
		f32(o)
	}
}

func asF32[T floatT](y []T) ([]float32, bool) {
	var z T
	if unsafe.Sizeof(z) != 4 {
		return nil, false
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(y))), len(y)), true
}

// asF64 views y as float64 when T is float64.
func asF64[T floatT](y []T) ([]float64, bool) {
	var z T
	if unsafe.Sizeof(z) != 8 {
		return nil, false
	}
	return unsafe.Slice((*float64)(unsafe.Pointer(unsafe.SliceData(y))), len(y)), true
}

func sigmoid(x float64) float64 {
	if x >= 0 {
		return 1 / (1 + math.Exp(-x))
	}
	e := math.Exp(x)
	return e / (1 + e)
}
