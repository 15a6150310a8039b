// raw.cl: dtype-agnostic moves on elements of one size, R being uchar,
// ushort, uint or ulong: strided copy, fill, where and gather.

__kernel void copy(long total, int rank, int8 shape,
                   __global const R* x, long xo, int8 xs,
                   __global R* y, long yo, int8 ys) {
	if (!ew_item(total, rank, shape, xs, ys, (int8)(0), (int8)(0), &xo, &yo, 0, 0)) return;
	y[yo] = x[xo];
}

__kernel void fill(long total, int rank, int8 shape, __global R* y, long yo, int8 ys, R v) {
	if (!ew_item(total, rank, shape, ys, (int8)(0), (int8)(0), (int8)(0), &yo, 0, 0, 0)) return;
	y[yo] = v;
}

__kernel void where_(long total, int rank, int8 shape,
                     __global const uchar* c, long co, int8 cs,
                     __global const R* A, long ao, int8 as,
                     __global const R* B, long bo, int8 bs,
                     __global R* y, long yo, int8 ys) {
	if (!ew_item(total, rank, shape, cs, as, bs, ys, &co, &ao, &bo, &yo)) return;
	y[yo] = c[co] ? A[ao] : B[bo];
}

// gather: Y[o, j, i] = X[o, idx[j], i], zero when idx[j] is out of range
// (flagged once per index in status, see flag_index).
#define GATHER(name, IT) \
__kernel void name(long total, __global const R* x, long xo, __global const IT* idx, long io, \
                   __global R* y, long yo, long outer, long axis, long inner, long nidx, \
                   __global uint* status, uint tag) { \
	long gid = get_global_id(0); \
	if (gid >= total) return; \
	long i = gid % inner, t = gid / inner; \
	long j = t % nidx, o = t / nidx; \
	long raw = (long)idx[io + j], k = raw; \
	if (k < 0) k += axis; \
	int bad = k < 0 || k >= axis; \
	y[yo + gid] = bad ? (R)0 : x[xo + (o * axis + k) * inner + i]; \
	if (bad && o == 0 && i == 0) flag_index(status, tag, raw, axis); \
}
GATHER(gather32, int)
GATHER(gather64, long)

// gather_elements: Y[o, j, i] = X[o, Idx[o, j, i], i] over Y contiguous
// [outer, n, inner]; Idx is a strided view (element strides is0, is1, is2,
// possibly zero or negative). Negative indices count from the end; indices
// still out of range give zeros (and are flagged in status, see
// flag_index).
#define GATHER_ELEMENTS(name, IT) \
__kernel void name(long total, __global const R* x, long xo, \
                   __global const IT* idx, long io, long is0, long is1, long is2, \
                   __global R* y, long yo, long axis, long n, long inner, \
                   __global uint* status, uint tag) { \
	long q = get_global_id(0); \
	if (q >= total) return; \
	long i = q % inner, t = q / inner; \
	long j = t % n, o = t / n; \
	long raw = (long)idx[io + o * is0 + j * is1 + i * is2], k = raw; \
	if (k < 0) k += axis; \
	int bad = k < 0 || k >= axis; \
	y[yo + q] = bad ? (R)0 : x[xo + (o * axis + k) * inner + i]; \
	if (bad) flag_index(status, tag, raw, axis); \
}
GATHER_ELEMENTS(gather_elements32, int)
GATHER_ELEMENTS(gather_elements64, long)
