// elementwise.cl: Unary (same dtype), Binary and comparisons over strided
// views of up to rank 8. One work-item per element.

#if IS_FLOAT
inline ACC maxnan(ACC a, ACC b) {
	if (a > b || ISNAN(a)) return a;
	if (ISNAN(b)) return b;
	if (a == b && a == 0 && signbit(b)) return a;
	return b;
}
inline ACC minnan(ACC a, ACC b) {
	if (a < b || ISNAN(a)) return a;
	if (ISNAN(b)) return b;
	if (a == b && a == 0 && signbit(a)) return a;
	return b;
}
inline ACC binop(int fn, ACC a, ACC b) {
	switch (fn) {
	case B_Add: return a + b;
	case B_Sub: return a - b;
	case B_Mul: return a * b;
	case B_Div: return a / b;
	case B_Pow: return pow(a, b);
	case B_Max: return maxnan(a, b);
	case B_Min: return minnan(a, b);
	case B_Mod: {
		ACC m = fmod(a, b);
		if (m != 0 && ((m < 0) != (b < 0))) m += b;
		return m;
	}
	case B_Fmod: return fmod(a, b);
	case B_PRelu: return a >= 0 ? a : a * b;
	case B_And: return (a != 0 && b != 0) ? K(1.0) : K(0.0);
	case B_Or: return (a != 0 || b != 0) ? K(1.0) : K(0.0);
	case B_Xor: return ((a != 0) != (b != 0)) ? K(1.0) : K(0.0);
	}
	return a;
}
inline ACC unop(int fn, ACC x, ACC a, ACC b) { return act(fn, x, a, b); }
#else
// Integers compute in 64 bits with wrapping arithmetic, then truncate.
inline long binop(int fn, long a, long b) {
	switch (fn) {
	case B_Add: return (long)((ulong)a + (ulong)b);
	case B_Sub: return (long)((ulong)a - (ulong)b);
	case B_Mul: return (long)((ulong)a * (ulong)b);
	case B_Div:
		if (b == 0) return 0;
		if (b == -1) return (long)(0UL - (ulong)a);
		return a / b;
	case B_Max: return a > b ? a : b;
	case B_Min: return a < b ? a : b;
	case B_Mod: {
		if (b == 0 || b == -1) return 0;
		long m = a % b;
		if (m != 0 && ((m < 0) != (b < 0))) m += b;
		return m;
	}
	case B_Fmod:
		if (b == 0 || b == -1) return 0;
		return a % b;
	case B_And: return (a != 0 && b != 0) ? 1 : 0;
	case B_Or: return (a != 0 || b != 0) ? 1 : 0;
	case B_Xor: return ((a != 0) != (b != 0)) ? 1 : 0;
	}
	return a;
}
inline long unop(int fn, long x, long a, long b) {
	switch (fn) {
	case U_Neg: return (long)(0UL - (ulong)x);
	case U_Abs: return x < 0 ? (long)(0UL - (ulong)x) : x;
	case U_Relu: return x < 0 ? 0 : x;
	case U_Sign: return x > 0 ? 1 : (x < 0 ? -1 : 0);
	case U_Not: return x == 0 ? 1 : 0;
	case U_Square: return (long)((ulong)x * (ulong)x);
	}
	return x;
}
#endif

#if !defined(ONE_KERNEL) || defined(KERNEL_unary)
__kernel void unary(long total, int rank, int8 shape,
                    __global const T* x, long xo, int8 xs,
                    __global T* y, long yo, int8 ys,
                    int fn, ACC a, ACC b) {
	if (!ew_item(total, rank, shape, xs, ys, (int8)(0), (int8)(0), &xo, &yo, 0, 0)) return;
	ST(y, yo, unop(fn, LD(x, xo), a, b));
}
#endif

#if !defined(ONE_KERNEL) || defined(KERNEL_binary)
__kernel void binary(long total, int rank, int8 shape,
                     __global const T* A, long ao, int8 as,
                     __global const T* B, long bo, int8 bs,
                     __global T* y, long yo, int8 ys, int fn) {
	if (!ew_item(total, rank, shape, as, bs, ys, (int8)(0), &ao, &bo, &yo, 0)) return;
	ST(y, yo, binop(fn, LD(A, ao), LD(B, bo)));
}
#endif

#if !defined(ONE_KERNEL) || defined(KERNEL_compare)
__kernel void compare(long total, int rank, int8 shape,
                      __global const T* A, long ao, int8 as,
                      __global const T* B, long bo, int8 bs,
                      __global uchar* y, long yo, int8 ys, int fn) {
	if (!ew_item(total, rank, shape, as, bs, ys, (int8)(0), &ao, &bo, &yo, 0)) return;
	ACC a = LD(A, ao), b = LD(B, bo);
	int r = 0;
	switch (fn) {
	case B_Equal: r = a == b; break;
	case B_Less: r = a < b; break;
	case B_LessEq: r = a <= b; break;
	case B_Greater: r = a > b; break;
	case B_GreaterEq: r = a >= b; break;
	}
	y[yo] = r ? 1 : 0;
}
#endif
