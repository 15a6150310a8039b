// gemv_body.glsl: gemv.comp's row and column modes for one operand order,
// included twice. The includer defines WISA (W is A), ROWS and COLS (the
// function names), VOFF(bt) and WOFF(bt) (V's and W's offsets in batch
// bt), LDV and LDW (scalar loads of V and W, compute type), and, where VEC is defined, LDV4 and LDW4 (loads of four elements as a
// vec4, indexed in units of four) and LDVC and LDWC (loads of one chunk,
// indexed in chunks; see gemv.comp).

void ROWS() {
	uint lane, nl, gid, ng;
	lanes(lane, nl, gid, ng);
	uint total = pc.M * pc.N, K = pc.K;
	uint per = ng * R;
	uint wid = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
	uint nwg = gl_NumWorkGroups.x * gl_NumWorkGroups.y;
	for (uint bt = gl_WorkGroupID.z; bt < pc.batch; bt += gl_NumWorkGroups.z) {
		uint bv = VOFF(bt), bw = WOFF(bt);
		for (uint r0 = wid * per; r0 < total; r0 += nwg * per) {
			uint rb = r0 + gid * R;
			CT acc[RMAX];
			[[unroll]] for (uint i = 0u; i < RMAX; i++) acc[i] = CT(0);
#ifdef VEC
			if ((pc.flags & 32u) != 0u) {
				// chunk index of each row's start (rows past the end
				// read the last row)
				vec4 s[RMAX];
				uint wr[RMAX];
				[[unroll]] for (uint i = 0u; i < RMAX; i++) {
					s[i] = vec4(0);
					wr[i] = (bw + min(rb + i, total - 1u) * K) / CHUNK;
				}
				uint KC = K / CHUNK, vc = bv / CHUNK;
				uint k = lane;
				// After specialization a step is straight-line code
				// whose loads do not depend on its FMAs: the compiler
				// issues all R*U + U of them first.
				for (; k + (U - 1u) * nl < KC; k += U * nl) {
					VCH_T xs[UMAX];
					[[unroll]] for (uint u = 0u; u < UMAX; u++) {
						if (u < U) xs[u] = LDVC(vc + k + u * nl);
					}
					[[unroll]] for (uint i = 0u; i < RMAX; i++) {
						[[unroll]] for (uint u = 0u; u < UMAX; u++) {
							if (i < R && u < U) s[i] = chdot(s[i], LDWC(wr[i] + k + u * nl), xs[u]);
						}
					}
				}
				for (; k < KC; k += nl) {
					VCH_T x0 = LDVC(vc + k);
					[[unroll]] for (uint i = 0u; i < RMAX; i++) {
						if (i < R) s[i] = chdot(s[i], LDWC(wr[i] + k), x0);
					}
				}
				[[unroll]] for (uint i = 0u; i < RMAX; i++) acc[i] = CT((s[i].x + s[i].y) + (s[i].z + s[i].w));
			} else
#endif
			{
				for (uint k = lane; k < K; k += nl) {
					CT x = LDV(bv + k);
					[[unroll]] for (uint i = 0u; i < RMAX; i++) {
						if (i < R) acc[i] = fma(LDW(bw + min(rb + i, total - 1u) * K + k), x, acc[i]);
					}
				}
			}
			CT sum[RMAX];
			[[unroll]] for (uint i = 0u; i < RMAX; i++) {
				if (i < R) sum[i] = lgsum(acc[i], lane);
			}
			// lane i finishes row i: one inlined epilogue (the
			// activations are long), the rows' stores side by side
			for (uint i0 = 0u; i0 < R; i0 += nl) {
				uint i = i0 + lane;
				CT v = CT(0);
				[[unroll]] for (uint j = 0u; j < RMAX; j++) {
					if (j == i) v = sum[j];
				}
				if (i < R && rb + i < total) {
#if WISA
					epilogue(bt, rb + i, 0u, v);
#else
					epilogue(bt, 0u, rb + i, v);
#endif
				}
			}
		}
	}
}

// COL_DOT(AT, LDWX, wb, ld, j) declares AT sum, this invocation's part of
// column j (of ld) of the weight at wb (loaded by LDWX as AT) dotted with
// the vector over rows k0 + s, k0 + s + ns, ... below k1, in U
// accumulators (the vector and scalar column modes differ only in AT).
#ifndef COL_DOT
#define COL_DOT(AT, LDWX, wb, ld, j) \
	AT a[UMAX]; \
	[[unroll]] for (uint u = 0u; u < UMAX; u++) a[u] = AT(0); \
	if (j < ld) { \
		uint k = k0 + s; \
		for (; k + (U - 1u) * ns < k1; k += U * ns) { \
			AT w[UMAX]; \
			[[unroll]] for (uint u = 0u; u < UMAX; u++) { \
				if (u < U) w[u] = LDWX(wb + (k + u * ns) * ld + j); \
			} \
			[[unroll]] for (uint u = 0u; u < UMAX; u++) { \
				if (u < U) a[u] = fma(w[u], AT(LDV(bv + k + u * ns)), a[u]); \
			} \
		} \
		for (; k < k1; k += ns) a[0] = fma(LDWX(wb + k * ld + j), AT(LDV(bv + k)), a[0]); \
	} \
	AT sum = ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
#endif

void COLS() {
	uint t = gl_LocalInvocationID.x;
	uint c = t % CL, s = t / CL, ns = WG / CL;
	bool vec = (pc.flags & 32u) != 0u;
#if WISA
	uint L = pc.M;
#else
	uint L = pc.N;
#endif
	uint K = pc.K, S = pc.S;
	uint spanw = vec ? 4u * CL : CL;
	uint ngroups = (L + spanw - 1u) / spanw;
	uint z = gl_WorkGroupID.y;
	uint k0 = z * pc.ks, k1 = min(K, k0 + pc.ks);
	for (uint bt = gl_WorkGroupID.z; bt < pc.batch; bt += gl_NumWorkGroups.z) {
		uint bv = VOFF(bt), bw = WOFF(bt);
		for (uint g = gl_WorkGroupID.x; g < ngroups; g += gl_NumWorkGroups.x) {
#ifdef VEC
			if (vec) {
				uint L4 = L >> 2, w4 = bw >> 2, j4 = g * CL + c;
				COL_DOT(vec4, LDW4, w4, L4, j4)
				sv[t * 4u] = CT(sum.x);
				sv[t * 4u + 1u] = CT(sum.y);
				sv[t * 4u + 2u] = CT(sum.z);
				sv[t * 4u + 3u] = CT(sum.w);
			} else
#endif
			{
				uint j = g * CL + c;
				COL_DOT(CT, LDW, bw, L, j)
				sv[t * 4u] = sum;
			}
			barrier();
			// More than 8 rows of K (a power of two of them): a tree
			// halves them in place first, so that row 0 holds the sums.
			// Up to 8 rows, row 0's invocations add them in order.
			uint nr = ns;
			if (ns > 8u && (ns & (ns - 1u)) == 0u) {
				for (uint h = ns >> 1; h > 0u; h >>= 1) {
					if (s < h) {
						[[unroll]] for (uint q = 0u; q < 4u; q++) sv[t * 4u + q] += sv[(t + h * CL) * 4u + q];
					}
					barrier();
				}
				nr = 1u;
			}
			if (s == 0u) {
				uint nq = vec ? 4u : 1u;
				for (uint q = 0u; q < nq; q++) {
					uint j = vec ? (g * CL + c) * 4u + q : g * CL + c;
					if (j < L) {
						CT sum = CT(0);
						for (uint p = 0u; p < nr; p++) sum += sv[(p * CL + c) * 4u + q];
						if (S > 1u) part[(bt * S + z) * L + j] = sum;
#if WISA
						else epilogue(bt, j, 0u, sum);
#else
						else epilogue(bt, 0u, j, sum);
#endif
					}
				}
			}
			barrier();
		}
	}
}
