// common.cl: types, loads and stores, and the shared functions of every
// program. The host prepends the U_*, B_* and R_* enum values and
// compiles with -D defines:
//   T       storage type of the program's dtype (float, double, half, int, ...)
//   ACC     compute type (float for f32/f16, double for f64, long for ints)
//   IS_FLOAT, IS_HALF, IS_DOUBLE, IS_INT  dtype class flags (0/1)
//   W_HALF  the weight operand is half (f16 weights, f32 activations)
//   EWL     local size of 1-D kernels; RWG: work-group size of row reductions
//   TM TN TK WM WN  GEMM tile (TM x TN outputs, TK deep, WM x WN per thread)
#if defined(IS_DOUBLE) && IS_DOUBLE
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#define K(x) (x)
#else
#define K(x) ((ACC)(x##f))
#endif

#if defined(IS_HALF) && IS_HALF
#define LD(p, i) vload_half((size_t)(i), (p))
#define ST(p, i, v) vstore_half_rte((float)(v), (size_t)(i), (p))
#else
#define LD(p, i) ((ACC)((p)[i]))
#define ST(p, i, v) ((p)[i] = (T)(v))
#endif

// WT and LDW: the weight operand of gemm and the convolutions (B, W):
// of type T, or, with W_HALF, half beside f32 activations
// (rt.HalfWeights), read by vload_half (core OpenCL: no cl_khr_fp16).
#if defined(W_HALF) && W_HALF
#define WT half
#define LDW(p, i) vload_half((size_t)(i), (p))
#else
#define WT T
#define LDW(p, i) LD(p, i)
#endif

#if IS_FLOAT
#define ISNAN(x) isnan(x)
#else
#define ISNAN(x) 0
#endif

// flag_index records an index k outside [-axis, axis) of a checked
// Gather, GatherElements or ScatterElements in the stream's status words
// (rt.IndexStatusWords): the op whose tag (launch index + 1) claims word 0
// first records the index and the axis size. tag 0: the op allows
// out-of-range indices.
inline void flag_index(__global uint* status, uint tag, long k, long axis) {
	if (tag != 0 && atomic_cmpxchg(&status[0], 0u, tag) == 0u) {
		status[1] = (uint)k;
		status[2] = (uint)((ulong)k >> 32);
		status[3] = (uint)axis;
	}
}

// ew_offsets decomposes the linear index gid over shape (row-major, rank
// dims) and returns the element offsets of up to four strided operands.
inline void ew_offsets(long gid, int rank, int8 shape, int8 s0, int8 s1, int8 s2, int8 s3,
                       long* o0, long* o1, long* o2, long* o3) {
	int sh[8], a[8], b[8], c[8], e[8];
	vstore8(shape, 0, sh);
	vstore8(s0, 0, a);
	vstore8(s1, 0, b);
	vstore8(s2, 0, c);
	vstore8(s3, 0, e);
	long r0 = 0, r1 = 0, r2 = 0, r3 = 0;
	if (gid <= 0x7fffffffL) {
		uint r = (uint)gid;
		for (int d = rank - 1; d >= 0; d--) {
			uint s = (uint)sh[d];
			uint q = r / s;
			int i = (int)(r - q * s);
			r = q;
			r0 += (long)i * a[d];
			r1 += (long)i * b[d];
			r2 += (long)i * c[d];
			r3 += (long)i * e[d];
		}
	} else {
		long r = gid;
		for (int d = rank - 1; d >= 0; d--) {
			long q = r / sh[d];
			long i = r - q * sh[d];
			r = q;
			r0 += i * a[d];
			r1 += i * b[d];
			r2 += i * c[d];
			r3 += i * e[d];
		}
	}
	*o0 += r0;
	*o1 += r1;
	*o2 += r2;
	*o3 += r3;
}

// ew_item is the prologue of the element-wise kernels: it returns false
// past the last of total elements, and otherwise advances the offsets of
// up to four strided operands (o1, o2 and o3 may be 0 where there are
// fewer) to this work-item's element.
inline bool ew_item(long total, int rank, int8 shape, int8 s0, int8 s1, int8 s2, int8 s3,
                    long* o0, long* o1, long* o2, long* o3) {
	long gid = get_global_id(0);
	if (gid >= total) return false;
	long z1 = 0, z2 = 0, z3 = 0;
	ew_offsets(gid, rank, shape, s0, s1, s2, s3, o0, o1 ? o1 : &z1, o2 ? o2 : &z2, o3 ? o3 : &z3);
	return true;
}

#if IS_FLOAT
inline ACC sigm(ACC x) {
	if (x >= 0) return K(1.0) / (K(1.0) + exp(-x));
	ACC e = exp(x);
	return e / (K(1.0) + e);
}

inline ACC softplus_(ACC x) {
	return x > 0 ? x + log1p(exp(-x)) : log1p(exp(x));
}

// clamp01 is max(0, min(1, v)) with NaN passing through.
inline ACC clamp01(ACC v) {
	v = v > K(1.0) ? K(1.0) : v;
	return v < 0 ? K(0.0) : v;
}

// act applies unary function fn (rt.UnaryFn) with parameters a and b.
inline ACC act(int fn, ACC x, ACC a, ACC b) {
	switch (fn) {
	case U_Copy: return x;
	case U_Neg: return -x;
	case U_Abs: return fabs(x);
	case U_Relu: return x < 0 ? K(0.0) : x;
	case U_LeakyRelu: return x >= 0 ? x : a * x;
	case U_Elu: return x >= 0 ? x : a * expm1(x);
	case U_Selu: return x > 0 ? b * x : b * a * expm1(x);
	case U_Celu: return x > 0 ? x : a * expm1(x / a);
	case U_Sigmoid: return sigm(x);
	case U_HardSigmoid: return clamp01(a * x + b);
	case U_HardSwish: return x * clamp01(x / K(6.0) + K(0.5));
	case U_Tanh: return tanh(x);
	case U_Gelu: return K(0.5) * x * (K(1.0) + erf(x * K(0.70710678118654752440)));
	case U_GeluTanh: return K(0.5) * x * (K(1.0) + tanh(K(0.79788456080286535588) * (x + K(0.044715) * x * x * x)));
	case U_Silu: return x * sigm(x);
	case U_Mish: return x * tanh(softplus_(x));
	case U_Softplus: return softplus_(x);
	case U_Softsign: return x / (K(1.0) + fabs(x));
	case U_Exp: return exp(x);
	case U_Log: return log(x);
	case U_Sqrt: return sqrt(x);
	case U_Rsqrt: return K(1.0) / sqrt(x);
	case U_Reciprocal: return K(1.0) / x;
	case U_Floor: return floor(x);
	case U_Ceil: return ceil(x);
	case U_Round: return rint(x);
	case U_Sign: return x > 0 ? K(1.0) : (x < 0 ? K(-1.0) : x);
	case U_Sin: return sin(x);
	case U_Cos: return cos(x);
	case U_Erf: return erf(x);
	case U_Clip: { ACC t = x < a ? a : x; return t > b ? b : t; }
	case U_Affine: return a * x + b;
	case U_Not: return x == 0 ? K(1.0) : K(0.0);
	case U_Square: return x * x;
	}
	return x;
}
#endif
