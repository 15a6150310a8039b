// Double-precision elementary functions. GLSL has no double exp/log/sin,
// so they are built from range reduction and polynomials, accurate to a
// few ulp over the ranges the runtime uses (the f64 tests ask for 1e-12).
double d_inf() { return double(uintBitsToFloat(0x7f800000u)); }
double d_nan() { return double(uintBitsToFloat(0x7fc00000u)); }

// dinv[n] is 1/n. The series below are Horner's rule in nested form,
// 1 + x/1 (1 + x/2 (1 + x/3 (...))), so their coefficients (1/n!,
// 1/(2n+1)) come from this table instead of being written out; the loops
// unroll and the products fold to constants.
const double dinv[24] = double[](
	0.0LF, 1.0LF, 1.0LF / 2.0LF, 1.0LF / 3.0LF, 1.0LF / 4.0LF, 1.0LF / 5.0LF,
	1.0LF / 6.0LF, 1.0LF / 7.0LF, 1.0LF / 8.0LF, 1.0LF / 9.0LF, 1.0LF / 10.0LF,
	1.0LF / 11.0LF, 1.0LF / 12.0LF, 1.0LF / 13.0LF, 1.0LF / 14.0LF, 1.0LF / 15.0LF,
	1.0LF / 16.0LF, 1.0LF / 17.0LF, 1.0LF / 18.0LF, 1.0LF / 19.0LF, 1.0LF / 20.0LF,
	1.0LF / 21.0LF, 1.0LF / 22.0LF, 1.0LF / 23.0LF);

double dexp(double x) {
	if (isnan(x)) return x;
	if (x > 709.78LF) return d_inf();
	if (x < -745.2LF) return 0.0LF;
	double k = floor(x * 1.4426950408889634LF + 0.5LF);
	double r = x - k * 0.693147180369123816490LF;
	r = r - k * 1.90821492927058770002e-10LF;
	// Taylor to degree 13 on |r| <= 0.35.
	double p = 1.0LF;
	[[unroll]] for (int n = 13; n >= 1; n--) p = 1.0LF + r * p * dinv[n];
	int ki = int(k);
	if (ki > 1000) return ldexp(ldexp(p, ki - 1000), 1000);
	if (ki < -1000) return ldexp(ldexp(p, ki + 1000), -1000);
	return ldexp(p, ki);
}

double dexpm1(double x) {
	if (abs(x) < 0.5LF) {
		// x (1 + x/2! + ... + x^18/19!).
		double p = 1.0LF;
		[[unroll]] for (int n = 19; n >= 2; n--) p = 1.0LF + x * p * dinv[n];
		return p * x;
	}
	return dexp(x) - 1.0LF;
}

double dlog(double x) {
	if (isnan(x) || x < 0.0LF) return d_nan();
	if (x == 0.0LF) return -d_inf();
	if (isinf(x)) return x;
	int e;
	double m = frexp(x, e);
	if (m < 0.70710678118654752LF) {
		m *= 2.0LF;
		e -= 1;
	}
	double f = (m - 1.0LF) / (m + 1.0LF);
	double f2 = f * f;
	double s = 0.0LF; // the sum of f2^k / (2k+1) for k <= 11
	[[unroll]] for (int k = 11; k >= 0; k--) s = s * f2 + dinv[2 * k + 1];
	double de = double(e);
	return 2.0LF * f * s + de * 0.693147180369123816490LF + de * 1.90821492927058770002e-10LF;
}

double dlog1p(double x) {
	double u = 1.0LF + x;
	if (u == 1.0LF) return x;
	return dlog(u) * x / (u - 1.0LF);
}

// sin and cos of |r| <= pi/4.
double dsin_k(double r) {
	double r2 = r * r;
	double p = 1.0LF; // r (1 - r2/3! + ... - r2^7/15!)
	[[unroll]] for (int n = 7; n >= 1; n--) p = 1.0LF - r2 * p * (dinv[2 * n] * dinv[2 * n + 1]);
	return p * r;
}
double dcos_k(double r) {
	double r2 = r * r;
	double p = 1.0LF; // 1 - r2/2! + ... + r2^9/18!
	[[unroll]] for (int n = 9; n >= 1; n--) p = 1.0LF - r2 * p * (dinv[2 * n - 1] * dinv[2 * n]);
	return p;
}
double dsincos(double x, bool wantCos) {
	if (isinf(x) || isnan(x)) return d_nan();
	double k = floor(x * 0.63661977236758134LF + 0.5LF);
	double r = x - k * 1.5707963267341256LF;
	r = r - k * 6.0771005065061922e-11LF;
	int q = int(mod(k, 4.0LF));
	if (wantCos) q += 1;
	q &= 3;
	double v = (q & 1) == 0 ? dsin_k(r) : dcos_k(r);
	return q >= 2 ? -v : v;
}
double dsin(double x) { return dsincos(x, false); }
double dcos(double x) { return dsincos(x, true); }

double derf(double x) {
	double z = abs(x);
	if (z < 3.0LF) {
		// Maclaurin series.
		double x2 = x * x;
		double term = x, sum = x;
		for (int n = 1; n < 80; n++) {
			term *= -x2 / double(n);
			double t = term / double(2 * n + 1);
			sum += t;
			if (abs(t) < 1e-17LF * abs(sum)) break;
		}
		return 1.1283791670955125739LF * sum;
	}
	if (z > 6.0LF) return x < 0.0LF ? -1.0LF : 1.0LF;
	// Continued fraction for erfc, evaluated backwards.
	double f = z;
	for (int n = 60; n >= 1; n--) f = z + (double(n) * 0.5LF) / f;
	double erfc = dexp(-z * z) / (f * 1.7724538509055160273LF);
	double e = 1.0LF - erfc;
	return x < 0.0LF ? -e : e;
}

double dpow(double a, double b) {
	if (b == 0.0LF) return 1.0LF;
	if (a == 0.0LF) return b > 0.0LF ? 0.0LF : d_inf();
	if (a < 0.0LF) {
		if (floor(b) != b) return d_nan();
		double r = dexp(b * dlog(-a));
		return mod(b, 2.0LF) == 1.0LF ? -r : r;
	}
	return dexp(b * dlog(a));
}
#define M_EXP dexp
#define M_LOG dlog
#define M_SIN dsin
#define M_COS dcos
#define M_EXPM1 dexpm1
#define M_LOG1P dlog1p
#define M_ERF derf
#define M_POW dpow
#define M_NAN d_nan()
#define M_INF d_inf()
