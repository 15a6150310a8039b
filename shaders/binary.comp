#version 450
#extension GL_GOOGLE_include_directive : require
// binary: strided Y[i] = fn(A[i], B[i]); fn is an rt.BinaryFn. With CMP the
// output is bool (comparisons).
#define RANK 6
#define NOPS 3
#include "common.glsl"
#if X_ISFLOAT
#ifdef CT_DOUBLE
#include "mathd.glsl"
#include "gen_act_d.glsl"
#else
#include "mathf.glsl"
#include "gen_act_f.glsl"
#endif
#endif

#ifdef VEC
#include "vec.glsl"
#endif

layout(push_constant) uniform PC {
	uint n;
	uint fn;
#ifdef VEC
	uint ntot, mask;
#endif
	uint shape[RANK - 1];
	uint off[NOPS];
	int st[NOPS * RANK];
} pc;
layout(std430, binding = 0) readonly buffer BA { X_T a[]; };
layout(std430, binding = 1) readonly buffer BB { X_T b[]; };
layout(std430, binding = 2) writeonly buffer BY { Y_T y[]; };
#ifdef VEC
layout(std430, binding = 0) readonly buffer BA4 { X_VT a4[]; };
layout(std430, binding = 1) readonly buffer BB4 { X_VT b4[]; };
layout(std430, binding = 2) writeonly buffer BY4 { Y_VT y4[]; };
#endif

X_CT ipow(X_CT a, X_CT b) {
#if X_ISFLOAT
	return M_POW(a, b);
#else
	if (b < X_CT(0)) return (a == X_CT(1)) ? X_CT(1) : (a == X_CT(-1) ? ((b & X_CT(1)) != X_CT(0) ? X_CT(-1) : X_CT(1)) : X_CT(0));
	X_CT r = X_CT(1);
	while (b > X_CT(0)) {
		if ((b & X_CT(1)) != X_CT(0)) r *= a;
		a *= a;
		b >>= X_CT(1);
	}
	return r;
#endif
}

X_CT trem(X_CT a, X_CT b) {
#if X_ISFLOAT
	CT q = trunc(a / b);
	CT r = fma(-b, q, a);
	// fix a quotient off by one from the rounded division
	if (r != CT(0) && (r < CT(0)) != (a < CT(0))) r += (r < CT(0)) == (b < CT(0)) ? -b : b;
	if (abs(r) >= abs(b)) r -= (r < CT(0)) == (b < CT(0)) ? b : -b;
	if (isinf(b) && !isinf(a)) return a;
	return r;
#else
	if (b == X_CT(0)) return X_CT(0);
	return a - (a / b) * b;
#endif
}

Y_CT apply(uint fn, X_CT a, X_CT b) {
	switch (fn) {
	case 0u: return Y_CT(a + b);
	case 1u: return Y_CT(a - b);
	case 2u: return Y_CT(a * b);
#if X_ISFLOAT
	case 3u: return Y_CT(a / b);
#else
	case 3u: return Y_CT(b == X_CT(0) ? X_CT(0) : a / b);
#endif
	case 4u: return Y_CT(ipow(a, b));
	case 5u: return Y_CT(max(a, b));
	case 6u: return Y_CT(min(a, b));
	case 7u: {
		X_CT r = trem(a, b);
		if (r != X_CT(0) && ((r < X_CT(0)) != (b < X_CT(0)))) r += b;
		return Y_CT(r);
	}
	case 8u: return Y_CT(trem(a, b));
	case 9u: return Y_CT(a >= X_CT(0) ? a : a * b);
	case 10u: return Y_CT(a == b ? 1 : 0);
	case 11u: return Y_CT(a < b ? 1 : 0);
	case 12u: return Y_CT(a <= b ? 1 : 0);
	case 13u: return Y_CT(a > b ? 1 : 0);
	case 14u: return Y_CT(a >= b ? 1 : 0);
	case 15u: return Y_CT((a != X_CT(0) && b != X_CT(0)) ? 1 : 0);
	case 16u: return Y_CT((a != X_CT(0) || b != X_CT(0)) ? 1 : 0);
	case 17u: return Y_CT(((a != X_CT(0)) != (b != X_CT(0))) ? 1 : 0);
	}
	return Y_CT(0);
}

void main() {
#ifdef VEC
	EW_LOOP(base, pc.n) {
		X_VCT va[EW_U], vb[EW_U];
		uint oy[EW_U];
		[[unroll]] for (uint u = 0u; u < EW_U; u++) {
			uint i = EW_ITEM(base, u);
			if (i < pc.n) {
				uint o[NOPS];
				ew_index(i, pc.shape, pc.st, pc.off, o);
				if (VEC_SPLAT(0)) va[u] = X_VCT(X_LD(a[o[0]]));
				else va[u] = X_VLD(a4[o[0] >> 2]);
				if (VEC_SPLAT(1)) vb[u] = X_VCT(X_LD(b[o[1]]));
				else vb[u] = X_VLD(b4[o[1] >> 2]);
				oy[u] = o[2] >> 2;
			}
		}
		[[unroll]] for (uint u = 0u; u < EW_U; u++) {
			if (EW_ITEM(base, u) < pc.n) {
				Y_VCT r;
				[[unroll]] for (int c = 0; c < 4; c++) r[c] = apply(pc.fn, va[u][c], vb[u][c]);
				y4[oy[u]] = Y_VST(r);
			}
		}
	}
	VEC_TAIL(i) y[VEC_TAIL_AT(2, i)] = Y_ST(apply(pc.fn, X_LD(a[VEC_TAIL_AT(0, i)]), X_LD(b[VEC_TAIL_AT(1, i)])));
#else
	EW_LOOP(base, pc.n) {
		X_CT va[EW_U], vb[EW_U];
		uint oy[EW_U];
		[[unroll]] for (uint u = 0u; u < EW_U; u++) {
			uint i = EW_ITEM(base, u);
			if (i < pc.n) {
				uint o[NOPS];
				ew_index(i, pc.shape, pc.st, pc.off, o);
				va[u] = X_LD(a[o[0]]);
				vb[u] = X_LD(b[o[1]]);
				oy[u] = o[2];
			}
		}
		[[unroll]] for (uint u = 0u; u < EW_U; u++) {
			if (EW_ITEM(base, u) < pc.n) y[oy[u]] = Y_ST(apply(pc.fn, va[u], vb[u]));
		}
	}
#endif
}
