#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
// attention: fused scaled dot-product attention (rt.Attention), flash
// style. One workgroup per (batch*head, block of WG/LANES query rows); a
// team of LANES invocations per query row. The workgroup walks the keys in
// blocks of BK = LANES: it stages the block's K and V rows in shared
// memory; lane j of a row scores key j against the row's Q (scaled, in
// shared memory); the row's block maximum and the probabilities
// p_j = exp(s_j - m) go through a shared BQ x BK tile; then each lane
// folds the block into the row's running sum and its Dv/LANES output dims
// (lane, lane+LANES, ...) with an online softmax. Each score and each
// exponential is computed once. No score tensor reaches memory. Compute is
// in f32 (CT) for f32 and f16 storage. The workgroup size (a multiple of
// LANES, at most 256) is specialization constant 0.
#define RANK 1
#define NOPS 1
#include "common.glsl"
#include "mathf.glsl"

#define LANES 32u
#define BK LANES
#define MAXROWS 8u
// DMAX (64 or 128, per variant) bounds D and Dv.
#define DL (DMAX / LANES)
layout(push_constant) uniform PC {
	uint lq, lk, d, dv;
	uint heads, nqb, flags, scaleBits; // flags: 1 causal, 2 mask
	uint offQ, offK, offV, offM, offY;
	int qb, qh, qi, qd;
	int kb, kh, ki, kd;
	int vb, vh, vi, vd;
	int mb, mh, mi, mj;
	int yb, yh, yi;
} pc;
// Y's dim stride is 1 (the lowering checks it); the mask binding is a
// dummy when flags lack 2.
layout(std430, binding = 0) readonly buffer BQ_ { X_T q[]; };
layout(std430, binding = 1) readonly buffer BK_ { X_T k[]; };
layout(std430, binding = 2) readonly buffer BV_ { X_T v[]; };
layout(std430, binding = 3) readonly buffer BM_ { X_T msk[]; };
layout(std430, binding = 4) writeonly buffer BY_ { Y_T y[]; };

#ifdef TILED
// The tiled variant (attention_*_t64: D and Dv up to 64) for rows that
// share their keys: a workgroup of WG (64 or 128) invocations takes
// BQ = WG/4 query rows and walks the keys in blocks of TBK. Invocation t
// belongs to row group rg = t/16 (rows rg + NRG*i, i < 4, NRG = WG/16) and
// holds lane g = t%16 of it: for the scores, keys g and g+16 of the block;
// for the output, dims 4g..4g+3. So each score is a 4-row x 2-key
// register tile and each output update a 4-row x 4-dim one, fed by vec4
// reads of shared memory (about one shared read per 8 FMAs, against two
// per FMA in the row-team variant). The rows' block maxima and the final
// sums go through a small shared table; the online softmax is as above.
#define TQ 32u
#define TBK 32u
#define QS4 (DMAX / 4u + 1u)
#define PS4 (TBK / 4u + 1u)
shared vec4 tq[TQ * QS4];
shared vec4 tk[TBK * QS4];
shared vec4 tv[TBK * (DMAX / 4u)];
shared vec4 tp[TQ * PS4];
shared vec4 tr[TQ * 4u];

void main() {
	uint t = gl_LocalInvocationID.x;
	uint NRG = WG / 16u, BQ = WG / 4u;
	uint rg = t / 16u, g = t % 16u;
	uint wg = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
	uint bh = wg / pc.nqb, qb0 = (wg % pc.nqb) * BQ;
	uint b = bh / pc.heads, h = bh % pc.heads;
	uint D = pc.d, DV = pc.dv, LK = pc.lk;
	uint DP = (D + 3u) & ~3u, DV4 = (DV + 3u) / 4u;
	float scale = uintBitsToFloat(pc.scaleBits);
	bool causal = (pc.flags & 1u) != 0u, masked = (pc.flags & 2u) != 0u;
	uint qbase = pc.offQ + b * uint(pc.qb) + h * uint(pc.qh);
	uint kbase = pc.offK + b * uint(pc.kb) + h * uint(pc.kh);
	uint vbase = pc.offV + b * uint(pc.vb) + h * uint(pc.vh);
	uint mbase = pc.offM + b * uint(pc.mb) + h * uint(pc.mh);
	uint ybase = pc.offY + b * uint(pc.yb) + h * uint(pc.yh);
	// Stage the block's queries, scaled, zero past D.
	for (uint e = t; e < BQ * DP; e += WG) {
		uint r = e / DP, c = e % DP;
		uint i = qb0 + r;
		float x = 0.0;
		if (i < pc.lq && c < D) x = float(X_LD(q[qbase + i * uint(pc.qi) + c * uint(pc.qd)])) * scale;
		tq[r * QS4 + c / 4u][c % 4u] = x;
	}
	// The keys row i may see, and the keys any row of the block may see.
	uint last[4];
	float m[4], l[4];
	vec4 acc[4];
	[[unroll]] for (uint a = 0u; a < 4u; a++) {
		uint i = qb0 + rg + NRG * a;
		last[a] = i < pc.lq ? (causal ? uint(clamp(int(i + LK) - int(pc.lq) + 1, 0, int(LK))) : LK) : 0u;
		m[a] = -M_INF;
		l[a] = 0.0;
		acc[a] = vec4(0.0);
	}
	uint keys = LK;
	if (causal) keys = uint(clamp(int(min(qb0 + BQ, pc.lq) + LK) - int(pc.lq), 0, int(LK)));
	for (uint j0 = 0u; j0 < keys; j0 += TBK) {
		barrier();
		for (uint e = t; e < TBK * DP; e += WG) {
			uint r = e / DP, c = e % DP;
			uint j = j0 + r;
			tk[r * QS4 + c / 4u][c % 4u] = j < LK && c < D ? float(X_LD(k[kbase + j * uint(pc.ki) + c * uint(pc.kd)])) : 0.0;
		}
		for (uint e = t; e < TBK * DV4 * 4u; e += WG) {
			uint r = e / (DV4 * 4u), c = e % (DV4 * 4u);
			uint j = j0 + r;
			tv[r * (DMAX / 4u) + c / 4u][c % 4u] = j < LK && c < DV ? float(X_LD(v[vbase + j * uint(pc.vi) + c * uint(pc.vd)])) : 0.0;
		}
		barrier();
		// Scores of rows rg + NRG*a against keys g and g+16.
		vec4 s0 = vec4(0.0), s1 = vec4(0.0);
		for (uint c4 = 0u; c4 < DP / 4u; c4++) {
			vec4 k0 = tk[g * QS4 + c4], k1 = tk[(g + 16u) * QS4 + c4];
			[[unroll]] for (uint a = 0u; a < 4u; a++) {
				vec4 qa = tq[(rg + NRG * a) * QS4 + c4];
				s0[a] += dot(qa, k0);
				s1[a] += dot(qa, k1);
			}
		}
		float sc[8];
		[[unroll]] for (uint a = 0u; a < 4u; a++) {
			uint i = qb0 + rg + NRG * a;
			uint j = j0 + g;
			sc[2u * a] = j < last[a] ? s0[a] + (masked ? float(X_LD(msk[mbase + i * uint(pc.mi) + j * uint(pc.mj)])) : 0.0) : -M_INF;
			j += 16u;
			sc[2u * a + 1u] = j < last[a] ? s1[a] + (masked ? float(X_LD(msk[mbase + i * uint(pc.mi) + j * uint(pc.mj)])) : 0.0) : -M_INF;
			uint r = rg + NRG * a;
			tr[r * 4u + g / 4u][g % 4u] = max(sc[2u * a], sc[2u * a + 1u]);
		}
		barrier();
		[[unroll]] for (uint a = 0u; a < 4u; a++) {
			uint r = rg + NRG * a;
			vec4 x = max(max(tr[r * 4u], tr[r * 4u + 1u]), max(tr[r * 4u + 2u], tr[r * 4u + 3u]));
			float mn = max(m[a], max(max(x.x, x.y), max(x.z, x.w)));
			// Nothing attended yet (mn = -inf): p = 0 and the state stays.
			bool none = mn == -M_INF;
			float alpha = none ? 1.0 : exp(m[a] - mn);
			float p0 = none ? 0.0 : exp(sc[2u * a] - mn), p1 = none ? 0.0 : exp(sc[2u * a + 1u] - mn);
			l[a] = l[a] * alpha + p0 + p1;
			acc[a] *= alpha;
			if (!none) m[a] = mn;
			tp[r * PS4 + g / 4u][g % 4u] = p0;
			tp[r * PS4 + (g + 16u) / 4u][g % 4u] = p1;
		}
		barrier();
		if (g < DV4) {
			for (uint j4 = 0u; j4 < TBK / 4u; j4++) {
				vec4 v0 = tv[(4u * j4) * (DMAX / 4u) + g], v1 = tv[(4u * j4 + 1u) * (DMAX / 4u) + g];
				vec4 v2 = tv[(4u * j4 + 2u) * (DMAX / 4u) + g], v3 = tv[(4u * j4 + 3u) * (DMAX / 4u) + g];
				[[unroll]] for (uint a = 0u; a < 4u; a++) {
					vec4 p = tp[(rg + NRG * a) * PS4 + j4];
					acc[a] += p.x * v0 + p.y * v1 + p.z * v2 + p.w * v3;
				}
			}
		}
	}
	// Each lane holds part of its rows' sums: add them up.
	barrier();
	[[unroll]] for (uint a = 0u; a < 4u; a++) tr[(rg + NRG * a) * 4u + g / 4u][g % 4u] = l[a];
	barrier();
	[[unroll]] for (uint a = 0u; a < 4u; a++) {
		uint r = rg + NRG * a, i = qb0 + r;
		if (i >= pc.lq) continue;
		vec4 x = tr[r * 4u] + tr[r * 4u + 1u] + tr[r * 4u + 2u] + tr[r * 4u + 3u];
		float sum = (x.x + x.y) + (x.z + x.w);
		float inv = sum > 0.0 ? 1.0 / sum : 0.0;
		[[unroll]] for (uint u = 0u; u < 4u; u++) {
			uint c = 4u * g + u;
			if (c < DV) y[ybase + i * uint(pc.yi) + c] = Y_ST(acc[a][u] * inv);
		}
	}
}
#else
#define BQ (WG / LANES)
shared float qs[MAXROWS * (DMAX + 1u)];
shared float ks[BK * (DMAX + 1u)];
shared float vs[BK * DMAX];
shared float ss[MAXROWS * (BK + 1u)];

void main() {
	uint t = gl_LocalInvocationID.x;
	uint row = t / LANES, lane = t % LANES;
	uint wg = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
	uint bh = wg / pc.nqb, qb0 = (wg % pc.nqb) * BQ;
	uint b = bh / pc.heads, h = bh % pc.heads;
	uint D = pc.d, DV = pc.dv, LK = pc.lk;
	float scale = uintBitsToFloat(pc.scaleBits);
	bool causal = (pc.flags & 1u) != 0u, masked = (pc.flags & 2u) != 0u;
	uint qbase = pc.offQ + b * uint(pc.qb) + h * uint(pc.qh);
	uint kbase = pc.offK + b * uint(pc.kb) + h * uint(pc.kh);
	uint vbase = pc.offV + b * uint(pc.vb) + h * uint(pc.vh);
	uint mbase = pc.offM + b * uint(pc.mb) + h * uint(pc.mh);
	uint ybase = pc.offY + b * uint(pc.yb) + h * uint(pc.yh);
	// Stage the block's queries, scaled.
	for (uint e = t; e < BQ * D; e += WG) {
		uint r = e / D, c = e % D;
		uint i = qb0 + r;
		float x = 0.0;
		if (i < pc.lq) x = float(X_LD(q[qbase + i * uint(pc.qi) + c * uint(pc.qd)])) * scale;
		qs[r * (DMAX + 1u) + c] = x;
	}
	uint i = qb0 + row;
	// The last key query i may see when causal.
	uint lastKey = LK;
	if (causal) lastKey = uint(clamp(int(i + LK) - int(pc.lq) + 1, 0, int(LK)));
	float m = -M_INF, l = 0.0;
	float acc[DL];
	[[unroll]] for (uint u = 0u; u < DL; u++) acc[u] = 0.0;
	uint so = row * (BK + 1u);
	for (uint j0 = 0u; j0 < LK; j0 += BK) {
		barrier();
		for (uint e = t; e < BK * D; e += WG) {
			uint r = e / D, c = e % D;
			uint j = j0 + r;
			ks[r * (DMAX + 1u) + c] = j < LK ? float(X_LD(k[kbase + j * uint(pc.ki) + c * uint(pc.kd)])) : 0.0;
		}
		for (uint e = t; e < BK * DV; e += WG) {
			uint r = e / DV, c = e % DV;
			uint j = j0 + r;
			vs[r * DMAX + c] = j < LK ? float(X_LD(v[vbase + j * uint(pc.vi) + c * uint(pc.vd)])) : 0.0;
		}
		barrier();
		// The score of this lane's key.
		uint j = j0 + lane;
		float s = -M_INF;
		if (j < lastKey && i < pc.lq) {
			s = 0.0;
			uint qo = row * (DMAX + 1u), ko = lane * (DMAX + 1u);
			for (uint c = 0u; c < D; c++) s += qs[qo + c] * ks[ko + c];
			if (masked) s += float(X_LD(msk[mbase + i * uint(pc.mi) + j * uint(pc.mj)]));
		}
		ss[so + lane] = s;
		barrier();
		float mb = -M_INF;
		for (uint kk = 0u; kk < BK; kk++) mb = max(mb, ss[so + kk]);
		float mn = max(m, mb);
		// Nothing attended yet (mn = -inf): p = 0 and the state stays.
		bool none = mn == -M_INF;
		float alpha = none ? 1.0 : exp(m - mn);
		float p = none ? 0.0 : exp(s - mn);
		barrier();
		ss[so + lane] = p;
		barrier();
		l *= alpha;
		[[unroll]] for (uint u = 0u; u < DL; u++) acc[u] *= alpha;
		for (uint kk = 0u; kk < BK; kk++) {
			float pk = ss[so + kk];
			l += pk;
			uint vo = kk * DMAX + lane;
			[[unroll]] for (uint u = 0u; u < DL; u++) acc[u] += pk * vs[vo + u * LANES];
		}
		if (!none) m = mn;
	}
	if (i >= pc.lq) return;
	float inv = l > 0.0 ? 1.0 / l : 0.0;
	[[unroll]] for (uint u = 0u; u < DL; u++) {
		uint c = lane + u * LANES;
		if (c < DV) y[ybase + i * uint(pc.yi) + c] = Y_ST(acc[u] * inv);
	}
}
#endif
