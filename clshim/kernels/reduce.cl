// reduce.cl: Reduce (serial and work-group tree), Softmax and Normalize
// over the middle axis of [Outer, N, Inner]. Work-group kernels use RWG
// work-items (a power of two) and a local-memory tree.
//
// RED_FN, when defined (devices with split programs), is the reduction
// function (rt.ReduceFn) fixed at build time: the reduce kernels then
// ignore their fn argument, and the compiler keeps the one path it takes
// (NVIDIA's build of reduce_serial with all of them took about 0.7 s).
#ifdef RED_FN
#define FIX_FN(fn) fn = RED_FN
#else
#define FIX_FN(fn)
#endif

inline ACC red_init(int fn) {
	switch (fn) {
	case R_Prod: return (ACC)1;
#if IS_FLOAT
	case R_Max: case R_LogSumExp: return -INFINITY;
	case R_Min: return INFINITY;
#else
	case R_Max: return LONG_MIN;
	case R_Min: return LONG_MAX;
#endif
	}
	return (ACC)0;
}

inline ACC red_comb(int fn, ACC s, ACC v) {
	switch (fn) {
#if IS_FLOAT
	case R_Prod: return s * v;
	case R_Max: case R_LogSumExp: return (v > s || ISNAN(v)) ? v : s;
	case R_Min: return (v < s || ISNAN(v)) ? v : s;
#else
	case R_Prod: return (long)((ulong)s * (ulong)v);
	case R_Max: return v > s ? v : s;
	case R_Min: return v < s ? v : s;
	case R_Sum: return (long)((ulong)s + (ulong)v);
#endif
	}
	return s + v;
}

// red_map is the per-element transform before combining.
inline ACC red_map(int fn, ACC v) {
#if IS_FLOAT
	switch (fn) {
	case R_SumSquare: case R_L2: return v * v;
	case R_L1: return fabs(v);
	}
#endif
	return v;
}

inline ACC red_final(int fn, ACC s, int n) {
#if !IS_FLOAT
	if (n == 0 && (fn == R_Max || fn == R_Min)) return 0;
#else
	switch (fn) {
	case R_Mean: return s / (ACC)n;
	case R_L2: return sqrt(s);
	}
#endif
	return s;
}

// arg_better reports whether (v, j) beats (best, bj) for ArgMax/ArgMin,
// bj < 0 meaning no candidate yet. NaNs are never candidates.
inline int arg_better(int fn, int last, ACC v, long j, ACC best, long bj) {
	if (bj < 0) return 1;
	if (fn == R_ArgMax ? v > best : v < best) return 1;
	if (v == best) return last ? j > bj : j < bj;
	return 0;
}

// row_partial reduces x[base + j*st] for j = j0, j0+step, ... < n.
inline void row_partial(int fn, int last, __global const T* x, long base, long st, int j0, int step, int n,
                        ACC m, ACC* out, long* outi) {
	if (fn == R_ArgMax || fn == R_ArgMin) {
		ACC best = 0;
		long bj = -1;
		for (int j = j0; j < n; j += step) {
			ACC v = LD(x, base + j * st);
			if (ISNAN(v)) continue;
			if (arg_better(fn, last, v, j, best, bj)) { best = v; bj = j; }
		}
		*out = best;
		*outi = bj;
		return;
	}
	ACC s = red_init(fn);
#if IS_FLOAT
	if (fn == R_LogSumExp && m == m) { // second pass: sum of exp(x - max)
		s = 0;
		for (int j = j0; j < n; j += step) s += exp(LD(x, base + j * st) - m);
		*out = s;
		return;
	}
#endif
	for (int j = j0; j < n; j += step) s = red_comb(fn, s, red_map(fn, LD(x, base + j * st)));
	*out = s;
}

// reduce_serial: one work-item per output.
#if !defined(ONE_KERNEL) || defined(KERNEL_reduce_serial)
__kernel void reduce_serial(__global const T* x, long xo, __global T* y, __global long* yi, long yo,
                            int outer, int n, int inner, int fn, int last) {
	FIX_FN(fn);
	long q = get_global_id(0);
	if (q >= (long)outer * inner) return;
	long base = xo + (q / inner) * (long)n * inner + q % inner;
	ACC r;
	long ri;
	if (fn == R_ArgMax || fn == R_ArgMin) {
		if (n > 0 && ISNAN(LD(x, base))) { yi[yo + q] = 0; return; }
		row_partial(fn, last, x, base, inner, 0, 1, n, 0, &r, &ri);
		yi[yo + q] = ri < 0 ? 0 : ri;
		return;
	}
#if IS_FLOAT
	if (fn == R_LogSumExp) {
		ACC m;
		row_partial(R_Max, 0, x, base, inner, 0, 1, n, 0, &m, &ri);
		if (ISNAN(m) || isinf(m)) { ST(y, yo + q, m); return; }
		row_partial(fn, 0, x, base, inner, 0, 1, n, m, &r, &ri);
		ST(y, yo + q, m + log(r));
		return;
	}
#endif
	row_partial(fn, last, x, base, inner, 0, 1, n, (ACC)0, &r, &ri);
	ST(y, yo + q, red_final(fn, r, n));
}
#endif

// tree combines v over the work-group with fn (sum when fn is R_Sum).
inline ACC tree(__local ACC* buf, int fn, ACC v) {
	int t = get_local_id(0);
	buf[t] = v;
	barrier(CLK_LOCAL_MEM_FENCE);
	for (int s = RWG / 2; s > 0; s >>= 1) {
		if (t < s) buf[t] = red_comb(fn, buf[t], buf[t + s]);
		barrier(CLK_LOCAL_MEM_FENCE);
	}
	ACC r = buf[0];
	barrier(CLK_LOCAL_MEM_FENCE);
	return r;
}

// reduce_wg: one work-group of RWG work-items per output.
#if !defined(ONE_KERNEL) || defined(KERNEL_reduce_wg)
__kernel __attribute__((reqd_work_group_size(RWG, 1, 1)))
void reduce_wg(__global const T* x, long xo, __global T* y, __global long* yi, long yo,
               int outer, int n, int inner, int fn, int last) {
	FIX_FN(fn);
	__local ACC buf[RWG];
	__local long ibuf[RWG];
	long q = get_group_id(0);
	int t = get_local_id(0);
	long base = xo + (q / inner) * (long)n * inner + q % inner;
	ACC r;
	long ri;
	if (fn == R_ArgMax || fn == R_ArgMin) {
		row_partial(fn, last, x, base, inner, t, RWG, n, 0, &r, &ri);
		buf[t] = r;
		ibuf[t] = ri;
		barrier(CLK_LOCAL_MEM_FENCE);
		for (int s = RWG / 2; s > 0; s >>= 1) {
			if (t < s && ibuf[t + s] >= 0 && arg_better(fn, last, buf[t + s], ibuf[t + s], buf[t], ibuf[t])) {
				buf[t] = buf[t + s];
				ibuf[t] = ibuf[t + s];
			}
			barrier(CLK_LOCAL_MEM_FENCE);
		}
		if (t == 0) {
			long b = ibuf[0];
			if (n > 0 && ISNAN(LD(x, base))) b = 0;
			yi[yo + q] = b < 0 ? 0 : b;
		}
		return;
	}
#if IS_FLOAT
	if (fn == R_LogSumExp) {
		row_partial(R_Max, 0, x, base, inner, t, RWG, n, 0, &r, &ri);
		ACC m = tree(buf, R_Max, r);
		if (ISNAN(m) || isinf(m)) {
			if (t == 0) ST(y, yo + q, m);
			return;
		}
		row_partial(fn, 0, x, base, inner, t, RWG, n, m, &r, &ri);
		ACC s = tree(buf, R_Sum, r);
		if (t == 0) ST(y, yo + q, m + log(s));
		return;
	}
#endif
	row_partial(fn, last, x, base, inner, t, RWG, n, (ACC)0, &r, &ri);
	r = tree(buf, fn, r);
	if (t == 0) ST(y, yo + q, red_final(fn, r, n));
}
#endif

#if IS_FLOAT
// softmax: one work-group per row of N elements with stride Inner.
#if !defined(ONE_KERNEL) || defined(KERNEL_softmax)
__kernel __attribute__((reqd_work_group_size(RWG, 1, 1)))
void softmax(__global const T* x, long xo, __global T* y, long yo, int n, int inner, int logm) {
	__local ACC buf[RWG];
	long q = get_group_id(0);
	int t = get_local_id(0);
	long base = (q / inner) * (long)n * inner + q % inner;
	ACC m = -INFINITY;
	for (int j = t; j < n; j += RWG) {
		ACC v = LD(x, xo + base + (long)j * inner);
		if (v > m || ISNAN(v)) m = v;
	}
	m = tree(buf, R_Max, m);
	ACC s = 0;
	for (int j = t; j < n; j += RWG) s += exp(LD(x, xo + base + (long)j * inner) - m);
	s = tree(buf, R_Sum, s);
	if (logm) {
		ACC ls = log(s);
		for (int j = t; j < n; j += RWG) {
			long p = base + (long)j * inner;
			ST(y, yo + p, (LD(x, xo + p) - m) - ls);
		}
	} else {
		ACC inv = K(1.0) / s;
		for (int j = t; j < n; j += RWG) {
			long p = base + (long)j * inner;
			ST(y, yo + p, exp(LD(x, xo + p) - m) * inv);
		}
	}
}
#endif

// normalize_rows: one work-group per row; population variance, two passes.
#if !defined(ONE_KERNEL) || defined(KERNEL_normalize_rows)
__kernel __attribute__((reqd_work_group_size(RWG, 1, 1)))
void normalize_rows(__global const T* x, long xo, __global T* y, long yo,
               __global const T* scale, long so, __global const T* bias, long bo,
               int n, ACC eps, int hasScale, int hasBias) {
	__local ACC buf[RWG];
	long base = get_group_id(0) * (long)n;
	int t = get_local_id(0);
	ACC s = 0;
	for (int j = t; j < n; j += RWG) s += LD(x, xo + base + j);
	ACC mean = tree(buf, R_Sum, s) / (ACC)n;
	ACC v = 0;
	for (int j = t; j < n; j += RWG) {
		ACC d = LD(x, xo + base + j) - mean;
		v += d * d;
	}
	ACC inv = K(1.0) / sqrt(tree(buf, R_Sum, v) / (ACC)n + eps);
	for (int j = t; j < n; j += RWG) {
		ACC z = (LD(x, xo + base + j) - mean) * inv;
		if (hasScale) z *= LD(scale, so + j);
		if (hasBias) z += LD(bias, bo + j);
		ST(y, yo + base + j, z);
	}
}
#endif
#endif
