// Float helpers with the accuracy the f32 tests expect (1e-5 relative).
float fexpm1(float x) {
	if (abs(x) < 0.5) {
		// Taylor series; the next term is below 1e-9 relative.
		float p = 1.0 / 39916800.0;
		p = p * x + 1.0 / 3628800.0;
		p = p * x + 1.0 / 362880.0;
		p = p * x + 1.0 / 40320.0;
		p = p * x + 1.0 / 5040.0;
		p = p * x + 1.0 / 720.0;
		p = p * x + 1.0 / 120.0;
		p = p * x + 1.0 / 24.0;
		p = p * x + 1.0 / 6.0;
		p = p * x + 0.5;
		p = p * x + 1.0;
		return p * x;
	}
	return exp(x) - 1.0;
}
float flog1p(float x) {
	float u = 1.0 + x;
	if (u == 1.0) return x;
	return log(u) * x / (u - 1.0);
}
float ferf(float x) {
	float z = abs(x);
	if (z < 0.5) {
		float x2 = x * x;
		float p = -1.0 / 75600.0;
		p = p * x2 + 1.0 / 9360.0;
		p = p * x2 - 1.0 / 1320.0;
		p = p * x2 + 1.0 / 216.0;
		p = p * x2 - 1.0 / 42.0;
		p = p * x2 + 1.0 / 10.0;
		p = p * x2 - 1.0 / 3.0;
		p = p * x2 + 1.0;
		return 1.1283791670955126 * x * p;
	}
	float t = 1.0 / (1.0 + 0.5 * z);
	float r = t * exp(-z * z - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 +
		t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 +
		t * (-0.82215223 + t * 0.17087277)))))))));
	float e = 1.0 - r;
	return x < 0.0 ? -e : e;
}
float fpow(float a, float b) {
	if (b == 0.0) return 1.0;
	if (a == 0.0) return b > 0.0 ? 0.0 : uintBitsToFloat(0x7f800000u);
	if (a < 0.0) {
		if (floor(b) != b) return uintBitsToFloat(0x7fc00000u);
		float r = pow(-a, b);
		return mod(b, 2.0) == 1.0 ? -r : r;
	}
	return pow(a, b);
}
#define M_EXP exp
#define M_LOG log
#define M_SIN sin
#define M_COS cos
#define M_EXPM1 fexpm1
#define M_LOG1P flog1p
#define M_ERF ferf
#define M_POW fpow
#define M_NAN uintBitsToFloat(0x7fc00000u)
#define M_INF uintBitsToFloat(0x7f800000u)
