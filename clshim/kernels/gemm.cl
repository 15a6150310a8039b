// gemm.cl: tiled GEMM with local memory, and Conv as an implicit GEMM
// (im2col computed while loading tiles). A work-group of (TN/WN, TM/WM)
// work-items computes a TM x TN tile of Y, each work-item WM x WN outputs
// strided by TM/WM rows and TN/WN columns, stepping through K by TK.

#define RM (TM / WM)
#define RN (TN / WN)
#define NT (RM * RN)

// MMA_STEP multiplies the tiles in local memory into acc.
#define MMA_STEP() \
	for (int k = 0; k < TK; k++) { \
		ACC a[WM], b[WN]; \
		for (int i = 0; i < WM; i++) a[i] = As[k][ty + i * RM]; \
		for (int j = 0; j < WN; j++) b[j] = Bs[k][tx + j * RN]; \
		for (int i = 0; i < WM; i++) \
			for (int j = 0; j < WN; j++) acc[i][j] = fma(a[i], b[j], acc[i][j]); \
	}

__kernel __attribute__((reqd_work_group_size(RN, RM, 1)))
void gemm(__global const T* A, long ao, __global const T* B, long bo,
          __global const T* bias, long bio, int bs0, int bs1,
          __global T* Y, long yo, int M, int N, int Kd, int transA, int transB,
          long strA, long strB, long strY, ACC alpha, ACC beta, int hasBias,
          int actFn, ACC actA, ACC actB) {
	__local ACC As[TK][TM];
	__local ACC Bs[TK][TN + 1];
	int tx = get_local_id(0), ty = get_local_id(1), tid = ty * RN + tx;
	int m0 = get_group_id(1) * TM, n0 = get_group_id(0) * TN;
	long z = get_group_id(2);
	ao += z * strA;
	bo += z * strB;
	yo += z * strY;
	ACC acc[WM][WN];
	for (int i = 0; i < WM; i++)
		for (int j = 0; j < WN; j++) acc[i][j] = 0;
	for (int k0 = 0; k0 < Kd; k0 += TK) {
		for (int l = tid; l < TM * TK; l += NT) {
			int m, k;
			if (transA) { m = l % TM; k = l / TM; } else { k = l % TK; m = l / TK; }
			int gm = m0 + m, gk = k0 + k;
			ACC v = 0;
			if (gm < M && gk < Kd) v = transA ? LD(A, ao + (long)gk * M + gm) : LD(A, ao + (long)gm * Kd + gk);
			As[k][m] = v;
		}
		for (int l = tid; l < TN * TK; l += NT) {
			int n, k;
			if (transB) { k = l % TK; n = l / TK; } else { n = l % TN; k = l / TN; }
			int gn = n0 + n, gk = k0 + k;
			ACC v = 0;
			if (gn < N && gk < Kd) v = transB ? LD(B, bo + (long)gn * Kd + gk) : LD(B, bo + (long)gk * N + gn);
			Bs[k][n] = v;
		}
		barrier(CLK_LOCAL_MEM_FENCE);
		MMA_STEP()
		barrier(CLK_LOCAL_MEM_FENCE);
	}
	for (int i = 0; i < WM; i++) {
		int gm = m0 + ty + i * RM;
		if (gm >= M) continue;
		for (int j = 0; j < WN; j++) {
			int gn = n0 + tx + j * RN;
			if (gn >= N) continue;
			ACC v = alpha * acc[i][j];
			if (hasBias) v += beta * LD(bias, bio + (long)gm * bs0 + (long)gn * bs1);
			ST(Y, yo + (long)gm * N + gn, act(actFn, v, actA, actB));
		}
	}
}

// conv_gemm: for image n and group g (z = n*G + g), Y[k, p] =
// W_g[k, r] @ col[r, p] with r = (c, kh, kw), p = (oh, ow).
__kernel __attribute__((reqd_work_group_size(RN, RM, 1)))
void conv_gemm(__global const T* X, long xo, __global const T* W, long wo,
               __global const T* bias, long bio, __global T* Y, long yo,
               int C, int H, int Wd, int Kc, int OH, int OW, int KH, int KW,
               int SH, int SW, int PT, int PL, int DH, int DW, int G,
               int hasBias, int actFn, ACC actA, ACC actB) {
	__local ACC As[TK][TM];
	__local ACC Bs[TK][TN + 1];
	int tx = get_local_id(0), ty = get_local_id(1), tid = ty * RN + tx;
	int m0 = get_group_id(1) * TM, n0 = get_group_id(0) * TN;
	int z = get_group_id(2);
	int img = z / G, g = z % G;
	int Cg = C / G, Kg = Kc / G, P = OH * OW, KK = KH * KW, R = Cg * KK;
	long xb = xo + ((long)img * C + (long)g * Cg) * H * Wd;
	long wb = wo + (long)g * Kg * R;
	ACC acc[WM][WN];
	for (int i = 0; i < WM; i++)
		for (int j = 0; j < WN; j++) acc[i][j] = 0;
	for (int k0 = 0; k0 < R; k0 += TK) {
		for (int l = tid; l < TM * TK; l += NT) {
			int k = l % TK, m = l / TK;
			int gm = m0 + m, gk = k0 + k;
			As[k][m] = (gm < Kg && gk < R) ? LD(W, wb + (long)gm * R + gk) : (ACC)0;
		}
		for (int l = tid; l < TN * TK; l += NT) {
			int n = l % TN, k = l / TN;
			int p = n0 + n, r = k0 + k;
			ACC v = 0;
			if (p < P && r < R) {
				int c = r / KK, rr = r - c * KK;
				int kh = rr / KW, kw = rr - kh * KW;
				int oh = p / OW, ow = p - oh * OW;
				int ih = oh * SH - PT + kh * DH, iw = ow * SW - PL + kw * DW;
				if (ih >= 0 && ih < H && iw >= 0 && iw < Wd) v = LD(X, xb + ((long)c * H + ih) * Wd + iw);
			}
			Bs[k][n] = v;
		}
		barrier(CLK_LOCAL_MEM_FENCE);
		MMA_STEP()
		barrier(CLK_LOCAL_MEM_FENCE);
	}
	long yb = yo + ((long)img * Kc + (long)g * Kg) * P;
	for (int i = 0; i < WM; i++) {
		int gm = m0 + ty + i * RM;
		if (gm >= Kg) continue;
		ACC b0 = hasBias ? LD(bias, bio + g * Kg + gm) : (ACC)0;
		for (int j = 0; j < WN; j++) {
			int p = n0 + tx + j * RN;
			if (p >= P) continue;
			ST(Y, yb + (long)gm * P + p, act(actFn, acc[i][j] + b0, actA, actB));
		}
	}
}
