// indexed.cl: ScatterElements and TopK. The host compiles it with the
// typed defines of the dtype (T, ACC, IS_*) plus R, the unsigned type of
// the element size (bitwise moves), and IS_BOOL.

#if IS_FLOAT
// go_max and go_min are Go's math.Max and math.Min (the CPU backend's
// semantics): an infinity of the right sign wins over NaN, NaN wins over
// numbers, and +0 is larger than -0.
inline ACC go_max(ACC a, ACC b) {
	if ((isinf(a) && a > 0) || (isinf(b) && b > 0)) return a > 0 && isinf(a) ? a : b;
	if (isnan(a)) return a;
	if (isnan(b)) return b;
	if (a == 0 && a == b) return signbit(a) ? b : a;
	return a > b ? a : b;
}

inline ACC go_min(ACC a, ACC b) {
	if ((isinf(a) && a < 0) || (isinf(b) && b < 0)) return a < 0 && isinf(a) ? a : b;
	if (isnan(a)) return a;
	if (isnan(b)) return b;
	if (a == 0 && a == b) return signbit(a) ? a : b;
	return a < b ? a : b;
}

inline ACC scatter_combine(int fn, ACC a, ACC u) {
	switch (fn) {
	case S_Add: return a + u;
	case S_Mul: return a * u;
	case S_Max: return go_max(a, u);
	case S_Min: return go_min(a, u);
	}
	return u;
}
#else
// Integers combine in 64 bits with wrap-around (unsigned arithmetic, so
// overflow is defined) and are truncated to the element type on store.
inline ACC scatter_combine(int fn, ACC a, ACC u) {
	switch (fn) {
	case S_Add: return (long)((ulong)a + (ulong)u);
	case S_Mul: return (long)((ulong)a * (ulong)u);
	case S_Max: return a > u ? a : u;
	case S_Min: return a < u ? a : u;
	}
	return u;
}
#endif

// scatter_elements: one work-item per column (o, i) of Y [outer, axis,
// inner], applying the updates j = 0..n-1 in order, so duplicates resolve
// like the CPU backend's sequential loop (the last Set wins) and the
// result is deterministic. Idx and Upd are strided views of shape
// [outer, n, inner]. An index out of range is skipped (and flagged in
// status, see flag_index).
#define SCATTER_ELEMENTS(name, IT) \
__kernel void name(long cols, __global T* y, long yo, \
                   __global const IT* idx, long io, long is0, long is1, long is2, \
                   __global const T* u, long uo, long us0, long us1, long us2, \
                   long axis, long n, long inner, int fn, __global uint* status, uint tag) { \
	long q = get_global_id(0); \
	if (q >= cols) return; \
	long i = q % inner, o = q / inner; \
	long ib = io + o * is0 + i * is2; \
	long ub = uo + o * us0 + i * us2; \
	long yb = yo + o * axis * inner + i; \
	for (long j = 0; j < n; j++) { \
		long raw = (long)idx[ib + j * is1], k = raw; \
		if (k < 0) k += axis; \
		if (k < 0 || k >= axis) { \
			flag_index(status, tag, raw, axis); \
			continue; \
		} \
		long ye = yb + k * inner, ue = ub + j * us1; \
		if (fn == S_Set) { \
			((__global R*)y)[ye] = ((__global const R*)u)[ue]; \
			continue; \
		} \
		ACC v = scatter_combine(fn, LD(y, ye), LD(u, ue)); \
		if (IS_BOOL) v = v != 0; \
		ST(y, ye, v); \
	} \
}
SCATTER_ELEMENTS(scatter_elements32, int)
SCATTER_ELEMENTS(scatter_elements64, long)

// topk_gt reports a > b in TopK's order, where NaN is larger than every
// number (and equal to NaN).
inline int topk_gt(ACC a, ACC b) {
	if (ISNAN(a)) return !ISNAN(b);
	if (ISNAN(b)) return 0;
	return a > b;
}

// topk: one work-item per element (o, j, i) of X [outer, n, inner]
// computes the element's rank in its column: the number of elements that
// come before it (larger, or smaller when !largest; equal ones with a
// lower index). Ranks are a permutation of 0..n-1, and an element with
// rank r < k is output r. The scan stops once the rank reaches k.
__kernel void topk(long total, __global const T* x, long xo,
                   __global T* v, long vo, __global long* ind, long io,
                   long n, long inner, long k, int largest) {
	long q = get_global_id(0);
	if (q >= total) return;
	long i = q % inner, t = q / inner;
	long j = t % n, o = t / n;
	long base = xo + o * n * inner + i;
	ACC a = LD(x, base + j * inner);
	long r = 0;
	for (long m = 0; m < n && r < k; m++) {
		ACC b = LD(x, base + m * inner);
		int ab = topk_gt(a, b), ba = topk_gt(b, a);
		int before = largest ? ba : ab;
		if (m < j && !ab && !ba) before = 1;
		r += before;
	}
	if (r >= k) return;
	long dst = (o * k + r) * inner + i;
	((__global R*)v)[vo + dst] = ((__global const R*)x)[base + j * inner];
	ind[io + dst] = j;
}
