#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
// wino: the three transforms of a Winograd F(4x4, 3x3) convolution (f32,
// 3x3 kernel, unit stride and dilation, one group; rt/vulkan's winoConv).
// With d the 6x6 input patch of a 4x4 output tile in one channel, g the
// 3x3 kernel of one (output, input) channel pair,
//   Y = A^T [ sum_c (G g G^T) . (B^T d B) ] A + bias
// (Lavin and Gray, interpolation points 0, +-1, +-2, inf; "." is the
// elementwise product, so the sum over c is 36 GEMMs, one per position
// xi = 6a + b of the 6x6 transformed tile, run by matmul.comp between the
// transforms). Tiles t = (n*TH + th)*TW + tw cover the output plane in
// 4x4 blocks; the GEMM operands are padded to TP columns (a multiple of
// 4, for matmul.comp's vec4 loads), the extra columns zero.
//
//   -D WINO_W: U[xi][k][c] = (G g[k][c] G^T)[xi], one invocation per (k, c)
//   -D WINO_X: V[xi][c][t] = (B^T d[c][t] B)[xi], one per (c, t < TP)
//   -D WINO_Y: Y[n, k, 4th + i, 4tw + j] = act((A^T M[.][k][t] A)[i][j]
//              + bias[k] + Res[same index]), one per (k, t), within the
//              output plane (flag 1: bias, flag 4: Res)
//
// Each invocation keeps its tile in registers; the transforms are
// unrolled over constant matrices, so the zero and unit coefficients
// fold away in the driver's compiler.
#define RANK 1
#define NOPS 1
#include "common.glsl"
#include "mathf.glsl"
#include "gen_act_f.glsl"

layout(push_constant) uniform PC {
	uint C, K, H, W;    // channels in and out, input plane
	uint OH, OW, TH, TW; // output plane, tiles per column and row
	uint T, TP, pt, pl; // tiles (N*TH*TW), padded to TP; top and left padding
	uint offX, offW, offB, offY; // element offsets of X (WINO_X), W (WINO_W), Bias, Y (WINO_Y)
	uint flags, act, offR, sYn; // sYn: elements between the images of Y and Res (winoy)
	uvec2 actA, actB;
} pc;

// B^T (6x6), G (6x3) and A^T (4x6), row-major.
const float BT[36] = float[36](
	4.0, 0.0, -5.0, 0.0, 1.0, 0.0,
	0.0, -4.0, -4.0, 1.0, 1.0, 0.0,
	0.0, 4.0, -4.0, -1.0, 1.0, 0.0,
	0.0, -2.0, -1.0, 2.0, 1.0, 0.0,
	0.0, 2.0, -1.0, -2.0, 1.0, 0.0,
	0.0, 4.0, 0.0, -5.0, 0.0, 1.0);
const float G[18] = float[18](
	1.0 / 4.0, 0.0, 0.0,
	-1.0 / 6.0, -1.0 / 6.0, -1.0 / 6.0,
	-1.0 / 6.0, 1.0 / 6.0, -1.0 / 6.0,
	1.0 / 24.0, 1.0 / 12.0, 1.0 / 6.0,
	1.0 / 24.0, -1.0 / 12.0, 1.0 / 6.0,
	0.0, 0.0, 1.0);
const float AT[24] = float[24](
	1.0, 1.0, 1.0, 1.0, 1.0, 0.0,
	0.0, 1.0, -1.0, 2.0, -2.0, 0.0,
	0.0, 1.0, 1.0, 4.0, 4.0, 0.0,
	0.0, 1.0, -1.0, 8.0, -8.0, 1.0);

#if defined(WINO_W)
layout(std430, binding = 0) readonly buffer BW { W_T w[]; };
layout(std430, binding = 1) writeonly buffer BU { float u[]; };

void main() {
	uint KC = pc.K * pc.C;
	GRID_LOOP(i, KC) {
		float g[9];
		[[unroll]] for (uint j = 0u; j < 9u; j++) g[j] = float(W_LD(w[pc.offW + i * 9u + j]));
		// s = G g (6x3), then (s G^T)[a][b] = sum_j s[a][j] G[b][j]
		float s[18];
		[[unroll]] for (uint a = 0u; a < 6u; a++)
			[[unroll]] for (uint j = 0u; j < 3u; j++)
				s[a * 3u + j] = G[a * 3u] * g[j] + G[a * 3u + 1u] * g[3u + j] + G[a * 3u + 2u] * g[6u + j];
		[[unroll]] for (uint a = 0u; a < 6u; a++)
			[[unroll]] for (uint b = 0u; b < 6u; b++)
				u[(a * 6u + b) * KC + i] = s[a * 3u] * G[b * 3u] + s[a * 3u + 1u] * G[b * 3u + 1u] + s[a * 3u + 2u] * G[b * 3u + 2u];
	}
}

#elif defined(WINO_X)
layout(std430, binding = 0) readonly buffer BX { X_T x[]; };
layout(std430, binding = 1) writeonly buffer BV { float v[]; };

void main() {
	uint CTP = pc.C * pc.TP;
	GRID_LOOP(i, CTP) {
		uint c = i / pc.TP, t = i - c * pc.TP;
		float d[36];
		bool live = t < pc.T;
		uint tt = min(t, pc.T - 1u);
		uint tpi = pc.TH * pc.TW;
		uint n = tt / tpi, r = tt - n * tpi;
		uint th = r / pc.TW, tw = r - th * pc.TW;
		int ih0 = int(th * 4u) - int(pc.pt), iw0 = int(tw * 4u) - int(pc.pl);
		uint base = pc.offX + (n * pc.C + c) * pc.H * pc.W;
		[[unroll]] for (uint a = 0u; a < 6u; a++) {
			int ih = ih0 + int(a);
			bool rowIn = live && ih >= 0 && ih < int(pc.H);
			[[unroll]] for (uint b = 0u; b < 6u; b++) {
				int iw = iw0 + int(b);
				d[a * 6u + b] = rowIn && iw >= 0 && iw < int(pc.W) ? float(X_LD(x[base + uint(ih) * pc.W + uint(iw)])) : 0.0;
			}
		}
		// s = B^T d, then (s B)[a][b] = sum_j s[a][j] B^T[b][j]
		float s[36];
		[[unroll]] for (uint a = 0u; a < 6u; a++)
			[[unroll]] for (uint b = 0u; b < 6u; b++) {
				float acc = 0.0;
				[[unroll]] for (uint j = 0u; j < 6u; j++) acc += BT[a * 6u + j] * d[j * 6u + b];
				s[a * 6u + b] = acc;
			}
		[[unroll]] for (uint a = 0u; a < 6u; a++)
			[[unroll]] for (uint b = 0u; b < 6u; b++) {
				float acc = 0.0;
				[[unroll]] for (uint j = 0u; j < 6u; j++) acc += s[a * 6u + j] * BT[b * 6u + j];
				v[(a * 6u + b) * CTP + i] = acc;
			}
	}
}

#elif defined(WINO_Y)
layout(std430, binding = 0) readonly buffer BM { float m[]; };
layout(std430, binding = 1) readonly buffer BB { X_T bias[]; };
// Res (flag 4): a residual shaped like Y, added before the activation;
// bound to Y's buffer (never read) without it.
layout(std430, binding = 2) readonly buffer BR { X_T res[]; };
layout(std430, binding = 3) writeonly buffer BY { Y_T y[]; };

void main() {
	uint KT = pc.K * pc.T, KTP = pc.K * pc.TP;
	float aa = pc_real(pc.actA), ab = pc_real(pc.actB);
	GRID_LOOP(i, KT) {
		uint k = i / pc.T, t = i - k * pc.T;
		uint src = k * pc.TP + t;
		float e[36];
		[[unroll]] for (uint j = 0u; j < 36u; j++) e[j] = m[j * KTP + src];
		// s = A^T e (4x6), then (s A)[a][b] = sum_j s[a][j] A^T[b][j]
		float s[24];
		[[unroll]] for (uint a = 0u; a < 4u; a++)
			[[unroll]] for (uint b = 0u; b < 6u; b++) {
				float acc = 0.0;
				[[unroll]] for (uint j = 0u; j < 6u; j++) acc += AT[a * 6u + j] * e[j * 6u + b];
				s[a * 6u + b] = acc;
			}
		float bv = (pc.flags & 1u) != 0u ? float(X_LD(bias[pc.offB + k])) : 0.0;
		uint tpi = pc.TH * pc.TW;
		uint n = t / tpi, r = t - n * tpi;
		uint th = r / pc.TW, tw = r - th * pc.TW;
		uint plane = n * pc.sYn + k * pc.OH * pc.OW;
		[[unroll]] for (uint a = 0u; a < 4u; a++) {
			uint oh = th * 4u + a;
			[[unroll]] for (uint b = 0u; b < 4u; b++) {
				uint ow = tw * 4u + b;
				if (oh < pc.OH && ow < pc.OW) {
					float acc = bv;
					[[unroll]] for (uint j = 0u; j < 6u; j++) acc += s[a * 6u + j] * AT[b * 6u + j];
					uint yi = plane + oh * pc.OW + ow;
					if ((pc.flags & 4u) != 0u) acc += float(X_LD(res[pc.offR + yi]));
					if (pc.act != 0u) acc = act_apply(pc.act, acc, aa, ab);
					y[pc.offY + yi] = Y_ST(acc);
				}
			}
		}
	}
}
#else
#error wino.comp: build with WINO_W, WINO_X or WINO_Y
#endif
