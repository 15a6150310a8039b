package cpu

import (
	"math"

	"github.com/vrun-go/vrun/rt"
)

// f32 transcendental functions, computed in float32 with the range
// reductions and polynomials of the vectorised kernels (ew_amd64_gen.py
// generates those from the same constants). They are the portable path
// (-tags purego, other GOARCH) and the reference the assembly is tested
// against. Errors, measured against float64 math rounded to float32 over
// every exponent (ewf32_test.go):
//
//	exp      ≤ 2 ULP (Cephes expf: x = n·ln2 + r, degree-6 polynomial; the
//	         2^n scale in two halves, so results in the subnormal range round once)
//	tanh     ≤ 3 ULP (|x| < 0.625: x + x·z·P(z), z = x², Cephes tanhf;
//	         otherwise 1 - 2/(exp(2|x|) + 1) with x's sign)
//	sigmoid  ≤ 3 ULP (e = exp(-|x|): 1/(1+e) for x ≥ 0, e/(1+e) below, so
//	         that tiny results keep their relative accuracy)
//	silu     ≤ 4 ULP (x·sigmoid(x)) where sigmoid(x) is a normal float
//	         (x > -87.3); below, an absolute error of at most 2·2^-149·|x|
//
// NaN gives NaN; exp(+Inf) = +Inf, exp(-Inf) = 0, tanh(±Inf) = ±1,
// sigmoid(+Inf) = 1, sigmoid(-Inf) = 0.

// Constants shared with ew_amd64_gen.py.
const (
	expHi, expLo       = 88.8, -104.0
	log2e              = 1.44269504088896341
	expC1, expC2       = 0.693359375, -2.12194440e-4
	expP0, expP1       = 1.9875691500e-4, 1.3981999507e-3
	expP2, expP3       = 8.3334519073e-3, 4.1665795894e-2
	expP4, expP5       = 1.6666665459e-1, 5.0000001201e-1
	tanhP0, tanhP1     = -5.70498872745e-3, 2.06390887954e-2
	tanhP2, tanhP3     = -5.37397155531e-2, 1.33314422036e-1
	tanhP4, tanhSmall  = -3.33332819422e-1, 0.625
	f32SignBit, f32Abs = 0x80000000, 0x7fffffff
)

// expf32 is exp(x) in float32.
func expf32(x float32) float32 {
	if x != x {
		return x
	}
	x = max(min(x, expHi), expLo)
	n := float32(math.RoundToEven(float64(x * log2e)))
	r := x - n*expC1
	r = r - n*expC2
	y := float32(expP0)
	y = y*r + expP1
	y = y*r + expP2
	y = y*r + expP3
	y = y*r + expP4
	y = y*r + expP5
	y = y*(r*r) + r
	y = y + 1
	ni := int32(n)
	n1 := ni >> 1
	n2 := ni - n1
	return y * math.Float32frombits(uint32(n1+127)<<23) * math.Float32frombits(uint32(n2+127)<<23)
}

// tanhf32 is tanh(x) in float32.
func tanhf32(x float32) float32 {
	ax := math.Float32frombits(math.Float32bits(x) & f32Abs)
	if ax < tanhSmall {
		z := x * x
		p := float32(tanhP0)
		p = p*z + tanhP1
		p = p*z + tanhP2
		p = p*z + tanhP3
		p = p*z + tanhP4
		return (p*z)*x + x
	}
	e := expf32(ax + ax)
	y := 1 - 2/(e+1)
	return math.Float32frombits(math.Float32bits(y) | math.Float32bits(x)&f32SignBit)
}

// sigmoidf32 is 1/(1+exp(-x)) in float32.
func sigmoidf32(x float32) float32 {
	e := expf32(math.Float32frombits(math.Float32bits(x) | f32SignBit))
	r := 1 / (1 + e)
	if math.Float32bits(x)&f32SignBit != 0 {
		return e * r
	}
	return r
}

// unaryF32Go computes y = fn(x) for the functions this file implements in
// float32, and reports whether fn is one of them.
func unaryF32Go(fn rt.UnaryFn, y, x []float32) bool {
	y = y[:len(x)]
	switch fn {
	case rt.Exp:
		for i, v := range x {
			y[i] = expf32(v)
		}
	case rt.Tanh:
		for i, v := range x {
			y[i] = tanhf32(v)
		}
	case rt.Sigmoid:
		for i, v := range x {
			y[i] = sigmoidf32(v)
		}
	case rt.Silu:
		for i, v := range x {
			y[i] = v * sigmoidf32(v)
		}
	default:
		return false
	}
	return true
}
