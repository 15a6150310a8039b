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
// every exponent (ewf32_test.go); the bound tested, then the largest
// error measured:
//
//	exp      ≤ 2 ULP (Cephes expf: x = n·ln2 + r, degree-6 polynomial; the
//	         2^n scale in two halves, so results in the subnormal range round once)
//	tanh     ≤ 3 ULP (|x| < 0.625: x + x·z·P(z), z = x², Cephes tanhf;
//	         otherwise 1 - 2/(exp(2|x|) + 1) with x's sign)
//	sigmoid  ≤ 3 ULP (e = exp(-|x|): 1/(1+e) for x ≥ 0, e/(1+e) below, so
//	         that tiny results keep their relative accuracy)
//	silu     ≤ 4 ULP (x·sigmoid(x)) where sigmoid(x) is a normal float
//	         (x > -87.3); below, an absolute error of at most 2·2^-149·|x|
//	erf      ≤ 3 ULP (|x| < 1: x·P(x²); otherwise 1 - erfc(|x|), see erfcBig)
//	gelu     ≤ 16 ULP (x·Φ(x): Φ = 1 - erfc(x/√2)/2 for x ≥ 0 and
//	         erfc(|x|/√2)/2 below, so that the negative tail keeps its
//	         relative accuracy; the largest errors are in (-√2, 0), where
//	         1 - erf cancels); subnormal results (x < -13) within 2^-139
//
// Measured maxima: exp 1, tanh 1, sigmoid 2, silu 3, erf 2, gelu 13 ULP.
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

// erf: |x| < 1: x·P(x²), P of degree 6; otherwise 1 - erfc(|x|) with
// erfc(a) = exp(-a²)·t·H(u), t = 1/a, u = (t - erfMid)/erfHalf, H of
// degree 9 fitted (Lawson minimax, relative error 7e-8) on
// t in [1/9.5, 1]; a² is split exactly (h + l) so that exp(-a²) keeps its
// accuracy where erfc is tiny.
var (
	erfP = [...]float32{1.1283791065216064, -0.3761262595653534, 0.1128358542919159, -0.026853814721107483,
		0.005188333801925182, -0.0008010239689610898, 7.854001160012558e-05}
	erfH = [...]float32{0.5019057989120483, -0.07611510157585144, -0.003920010756701231, 0.008710475638508797,
		-0.003866465762257576, 0.0009213568991981447, 9.93547000689432e-05, -0.00026238703867420554,
		0.00013036400196142495, -1.9786000848398544e-05}
)

const (
	erfTLo      = 0.10526315867900848 // 1/9.5: t is clamped here (erfc < 1e-40 beyond)
	erfUScale   = 2.2352941036224365  // 1/erfHalf
	erfUOffset  = -1.2352941036224365 // -erfMid/erfHalf
	invSqrt2F32 = 0.70710678118654752
)

// erfSmall is erf(x) for |x| < 1.
func erfSmall(x float32) float32 {
	z := x * x
	p := erfP[6]
	for k := 5; k >= 0; k-- {
		p = p*z + erfP[k]
	}
	return x * p
}

// erfcBig is erfc(a) for a >= 1, given a² = h + l exactly.
func erfcBig(a, h, l float32) float32 {
	e := expf32(-h) * (1 - l)
	t := max(1/a, erfTLo)
	u := t*erfUScale + erfUOffset
	p := erfH[9]
	for k := 8; k >= 0; k-- {
		p = p*u + erfH[k]
	}
	return e * (p * t)
}

// sq splits a² into h + l exactly (h = a² rounded to float32).
func sq(a float32) (h, l float32) {
	h = a * a
	return h, float32(float64(a)*float64(a) - float64(h))
}

// erff32 is erf(x) in float32.
func erff32(x float32) float32 {
	ax := math.Float32frombits(math.Float32bits(x) & f32Abs)
	if ax < 1 {
		return erfSmall(x)
	}
	if ax != ax {
		return x
	}
	ax = min(ax, 16) // erfc(16) is 0 in float32; keeps a² finite
	h, l := sq(ax)
	r := 1 - erfcBig(ax, h, l)
	return math.Float32frombits(math.Float32bits(r) | math.Float32bits(x)&f32SignBit)
}

// geluf32 is x·Φ(x) = 0.5·x·(1 + erf(x/√2)) in float32, with Φ(x) =
// 0.5·erfc(|x|/√2) for x < 0 so that it keeps its relative accuracy.
func geluf32(x float32) float32 {
	if x != x {
		return x
	}
	xc := max(min(x, 32), -32) // erfc(32/√2) is 0 in float32; keeps x² finite
	a := math.Float32frombits(math.Float32bits(xc)&f32Abs) * invSqrt2F32
	var erfc float32
	if a < 1 {
		erfc = 1 - erfSmall(a)
	} else {
		h, l := sq(xc) // a² = x²/2 = h/2 + l/2, exactly
		erfc = erfcBig(a, h*0.5, l*0.5)
	}
	if x >= 0 {
		return x * (1 - 0.5*erfc)
	}
	return x * (0.5 * erfc)
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
	var f func(float32) float32
	switch fn {
	case rt.Exp:
		f = expf32
	case rt.Tanh:
		f = tanhf32
	case rt.Sigmoid:
		f = sigmoidf32
	case rt.Silu:
		f = func(v float32) float32 { return v * sigmoidf32(v) }
	case rt.Erf:
		f = erff32
	case rt.Gelu:
		f = geluf32
	default:
		return false
	}
	y = y[:len(x)]
	for i, v := range x {
		y[i] = f(v)
	}
	return true
}
