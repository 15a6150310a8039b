// cast.cl: Unary Copy between dtypes. Defines: XT/YT storage types,
// XF/YF (1 for float dtypes), XH/YH (1 for half), YB (1 for bool),
// XD/YD (1 for double).
#if (defined(XD) && XD) || (defined(YD) && YD)
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#endif

__kernel void cast(long total, int rank, int8 shape,
                   __global const XT* x, long xo, int8 xs,
                   __global YT* y, long yo, int8 ys) {
	if (!ew_item(total, rank, shape, xs, ys, (int8)(0), (int8)(0), &xo, &yo, 0, 0)) return;
#if XH
	float v = vload_half((size_t)xo, x);
#elif XF
	XT v = x[xo];
#else
	long v = (long)x[xo];
#endif
#if YB
	y[yo] = v != 0 ? 1 : 0;
#elif YH
	vstore_half_rte((float)v, (size_t)yo, y);
#elif YF
	y[yo] = (YT)v;
#elif XF || XH
	y[yo] = (YT)convert_long_sat_rtz(v);
#else
	y[yo] = (YT)v;
#endif
}
