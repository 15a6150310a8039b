// gemv_body.glsl: gemv.comp's row and column modes for one operand order,
// included twice. The includer defines WISA (W is A), ROWS and COLS (the
// function names), LDV and LDW (scalar loads of V and W, compute type),
// and, where VEC is defined, LDV4 and LDW4 (loads of four elements as a
// vec4, indexed in units of four).

void ROWS() {
	uint lane, nl, gid, ng;
	lanes(lane, nl, gid, ng);
	uint total = pc.M * pc.N, K = pc.K;
	uint per = ng * R;
	uint wid = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
	uint nwg = gl_NumWorkGroups.x * gl_NumWorkGroups.y;
	for (uint bt = gl_WorkGroupID.z; bt < pc.batch; bt += gl_NumWorkGroups.z) {
#if WISA
		uint bv = pc.offB + bt * pc.sB, bw = pc.offA + bt * pc.sA;
#else
		uint bv = pc.offA + bt * pc.sA, bw = pc.offB + bt * pc.sB;
#endif
		for (uint r0 = wid * per; r0 < total; r0 += nwg * per) {
			uint rb = r0 + gid * R;
			CT acc[RMAX];
			[[unroll]] for (uint i = 0u; i < RMAX; i++) acc[i] = CT(0);
#ifdef VEC
			if ((pc.flags & 32u) != 0u) {
				vec4 s[RMAX];
				[[unroll]] for (uint i = 0u; i < RMAX; i++) s[i] = vec4(0);
				uint K4 = K >> 2, v4 = bv >> 2;
				uint k = lane;
				for (; k + nl < K4; k += 2u * nl) {
					vec4 x0 = LDV4(v4 + k), x1 = LDV4(v4 + k + nl);
					[[unroll]] for (uint i = 0u; i < R; i++) {
						uint w4 = (bw + min(rb + i, total - 1u) * K) >> 2;
						vec4 w0 = LDW4(w4 + k), w1 = LDW4(w4 + k + nl);
						s[i] = fma(w0, x0, s[i]);
						s[i] = fma(w1, x1, s[i]);
					}
				}
				if (k < K4) {
					vec4 x0 = LDV4(v4 + k);
					[[unroll]] for (uint i = 0u; i < R; i++) {
						uint w4 = (bw + min(rb + i, total - 1u) * K) >> 2;
						s[i] = fma(LDW4(w4 + k), x0, s[i]);
					}
				}
				[[unroll]] for (uint i = 0u; i < R; i++) acc[i] = CT((s[i].x + s[i].y) + (s[i].z + s[i].w));
			} else
#endif
			{
				for (uint k = lane; k < K; k += nl) {
					CT x = LDV(bv + k);
					[[unroll]] for (uint i = 0u; i < R; i++) acc[i] = fma(LDW(bw + min(rb + i, total - 1u) * K + k), x, acc[i]);
				}
			}
			[[unroll]] for (uint i = 0u; i < R; i++) {
				CT v = lgsum(acc[i], lane);
				if (lane == 0u && rb + i < total) {
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
#if WISA
		uint bv = pc.offB + bt * pc.sB, bw = pc.offA + bt * pc.sA;
#else
		uint bv = pc.offA + bt * pc.sA, bw = pc.offB + bt * pc.sB;
#endif
		for (uint g = gl_WorkGroupID.x; g < ngroups; g += gl_NumWorkGroups.x) {
#ifdef VEC
			if (vec) {
				uint L4 = L >> 2, w4 = bw >> 2, j4 = g * CL + c;
				vec4 a0 = vec4(0), a1 = vec4(0), a2 = vec4(0), a3 = vec4(0);
				if (j4 < L4) {
					uint k = k0 + s;
					for (; k + 3u * ns < k1; k += 4u * ns) {
						vec4 w0 = LDW4(w4 + k * L4 + j4);
						vec4 w1 = LDW4(w4 + (k + ns) * L4 + j4);
						vec4 w2 = LDW4(w4 + (k + 2u * ns) * L4 + j4);
						vec4 w3 = LDW4(w4 + (k + 3u * ns) * L4 + j4);
						a0 = fma(w0, vec4(LDV(bv + k)), a0);
						a1 = fma(w1, vec4(LDV(bv + k + ns)), a1);
						a2 = fma(w2, vec4(LDV(bv + k + 2u * ns)), a2);
						a3 = fma(w3, vec4(LDV(bv + k + 3u * ns)), a3);
					}
					for (; k < k1; k += ns) a0 = fma(LDW4(w4 + k * L4 + j4), vec4(LDV(bv + k)), a0);
				}
				vec4 sum = (a0 + a1) + (a2 + a3);
				sv[t * 4u] = CT(sum.x);
				sv[t * 4u + 1u] = CT(sum.y);
				sv[t * 4u + 2u] = CT(sum.z);
				sv[t * 4u + 3u] = CT(sum.w);
			} else
#endif
			{
				uint j = g * CL + c;
				CT a0 = CT(0), a1 = CT(0), a2 = CT(0), a3 = CT(0);
				if (j < L) {
					uint k = k0 + s;
					for (; k + 3u * ns < k1; k += 4u * ns) {
						CT w0 = LDW(bw + k * L + j);
						CT w1 = LDW(bw + (k + ns) * L + j);
						CT w2 = LDW(bw + (k + 2u * ns) * L + j);
						CT w3 = LDW(bw + (k + 3u * ns) * L + j);
						a0 = fma(LDV(bv + k), w0, a0);
						a1 = fma(LDV(bv + k + ns), w1, a1);
						a2 = fma(LDV(bv + k + 2u * ns), w2, a2);
						a3 = fma(LDV(bv + k + 3u * ns), w3, a3);
					}
					for (; k < k1; k += ns) a0 = fma(LDV(bv + k), LDW(bw + k * L + j), a0);
				}
				sv[t * 4u] = (a0 + a1) + (a2 + a3);
			}
			barrier();
			if (s == 0u) {
				uint nq = vec ? 4u : 1u;
				for (uint q = 0u; q < nq; q++) {
					uint j = vec ? (g * CL + c) * 4u + q : g * CL + c;
					if (j < L) {
						CT sum = CT(0);
						for (uint p = 0u; p < ns; p++) sum += sv[(p * CL + c) * 4u + q];
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
