// gemm.cl: register-blocked GEMM with local-memory tiles, and Conv as an
// implicit GEMM (im2col computed while loading tiles). A work-group of
// (TN/WN, TM/WM) work-items computes a TM x TN tile of Y, stepping through
// K by TK; each work-item holds a WM x WN micro-tile in registers, made of
// (WM/4) x (WN/4) blocks of 4x4 outputs so that it reads its operands from
// local memory as 4-vectors. The next K step's tiles are loaded from
// global memory into registers while the current one is multiplied
// (prefetch), and the local rows are padded by 4 elements.

#define RM (TM / WM)
#define RN (TN / WN)
#define NT (RM * RN)
#define LA (TM * TK / NT)
#define LB (TN * TK / NT)
#define PM (TM + 4)
#define PN (TN + 4)
#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#define ACC4 CAT(ACC, 4)

// EPI_ACT applies the epilogue's activation: ACT_FN (rt.UnaryFn) when the
// host fixes it at build time, so that the compiler keeps one case of
// act's switch in the unrolled epilogue instead of all of them (a
// smaller program that NVIDIA's compiler builds several times faster),
// else the kernel's actFn argument.
#ifdef ACT_FN
#define EPI_ACT(fn, x, a, b) act(ACT_FN, (x), (a), (b))
#else
#define EPI_ACT(fn, x, a, b) act((fn), (x), (a), (b))
#endif

#if (TM * TK) % NT != 0 || (TN * TK) % NT != 0 || WM % 4 != 0 || WN % 4 != 0
#error "gemm.cl: unsupported tile shape"
#endif

// MMA_UNROLL (a build option, for cold-start experiments: VRUN_CL_OPTS)
// caps the unrolling of MMA_STEP's depth loop with #pragma unroll, for a
// smaller program that the driver's compiler may build faster; without it
// the compiler decides (fully, for TK steps).
#define GEMM_PRAGMA_(x) _Pragma(#x)
#define GEMM_PRAGMA(x) GEMM_PRAGMA_(x)
#ifdef MMA_UNROLL
#define MMA_UNROLL_K GEMM_PRAGMA(unroll MMA_UNROLL)
#else
#define MMA_UNROLL_K
#endif

// MMA_STEP multiplies the tiles in local memory into acc.
#define MMA_STEP() \
	MMA_UNROLL_K \
	for (int k = 0; k < TK; k++) { \
		ACC a[WM], b[WN]; \
		for (int i = 0; i < WM / 4; i++) { \
			ACC4 v = As[k][i * RM + ty]; \
			a[4 * i] = v.x; a[4 * i + 1] = v.y; a[4 * i + 2] = v.z; a[4 * i + 3] = v.w; \
		} \
		for (int j = 0; j < WN / 4; j++) { \
			ACC4 v = Bs[k][j * RN + tx]; \
			b[4 * j] = v.x; b[4 * j + 1] = v.y; b[4 * j + 2] = v.z; b[4 * j + 3] = v.w; \
		} \
		for (int i = 0; i < WM; i++) \
			for (int j = 0; j < WN; j++) acc[i][j] = fma(a[i], b[j], acc[i][j]); \
	}

// ROW and COL map micro-tile index i (j) to the tile's row (column).
#define ROW(i) (((i) >> 2) * (RM * 4) + ty * 4 + ((i) & 3))
#define COL(j) (((j) >> 2) * (RN * 4) + tx * 4 + ((j) & 3))

// gemm_idx gives element l's row r and depth k in an operand's tile of
// tr rows and TK depth: k fastest where kfast (a row-major R x K operand,
// so that reads coalesce), r fastest otherwise.
inline void gemm_idx(int l, int kfast, int tr, int* r, int* k) {
	if (kfast) { *k = l % TK; *r = l / TK; } else { *r = l % tr; *k = l / tr; }
}

// gemm_ld reads element (r, k) of an R x Kd operand at X + xo, stored k
// fastest (kfast) or r fastest, and 0 outside it.
inline ACC gemm_ld(__global const T* X, long xo, int r, int k, int R, int Kd, int kfast) {
	if (r >= R || k >= Kd) return 0;
	return kfast ? LD(X, xo + (long)r * Kd + k) : LD(X, xo + (long)k * R + r);
}

// gemm_ldw is gemm_ld for the weight operand (WT, LDW).
inline ACC gemm_ldw(__global const WT* X, long xo, int r, int k, int R, int Kd, int kfast) {
	if (r >= R || k >= Kd) return 0;
	return kfast ? LDW(X, xo + (long)r * Kd + k) : LDW(X, xo + (long)k * R + r);
}

// GEMM_LOAD_TILE reads this work-item's L elements of an operand's tile
// (tr rows from r0, TK depth from k0) of the R x Kd operand at X + xo,
// stored k fastest where kfast, into the registers regs.
#define GEMM_LOAD_TILE(regs, L, tr, X, xo, r0, k0, R, Kd, kfast) GEMM_LOAD_TILE_BY(gemm_ld, regs, L, tr, X, xo, r0, k0, R, Kd, kfast)
#define GEMM_LOAD_TILEW(regs, L, tr, X, xo, r0, k0, R, Kd, kfast) GEMM_LOAD_TILE_BY(gemm_ldw, regs, L, tr, X, xo, r0, k0, R, Kd, kfast)
#define GEMM_LOAD_TILE_BY(ld, regs, L, tr, X, xo, r0, k0, R, Kd, kfast) \
	for (int e = 0; e < (L); e++) { \
		int r, k; \
		gemm_idx(tid + e * NT, (kfast), (tr), &r, &k); \
		regs[e] = ld((X), (xo), (r0) + r, (k0) + k, (R), (Kd), (kfast)); \
	}

// GEMM_STORE_TILES moves the registers ra and rb, loaded by a kernel's
// LOAD_TILES with A's and B's tiles k fastest where ka and kb, into the
// local tiles as and bs (depth-major).
#define GEMM_STORE_TILES(ka, kb) \
	for (int e = 0; e < LA; e++) { \
		int m, k; \
		gemm_idx(tid + e * NT, (ka), TM, &m, &k); \
		as[k * PM + m] = ra[e]; \
	} \
	for (int e = 0; e < LB; e++) { \
		int n, k; \
		gemm_idx(tid + e * NT, (kb), TN, &n, &k); \
		bs[k * PN + n] = rb[e]; \
	}

#if !defined(ONE_KERNEL) || defined(KERNEL_gemm)
__kernel __attribute__((reqd_work_group_size(RN, RM, 1)))
void gemm(__global const T* A, long ao, __global const WT* B, long bo,
          __global const T* bias, long bio, int bs0, int bs1,
          __global T* Y, long yo, int M, int N, int Kd, int transA, int transB,
          long strA, long strB, long strY, ACC alpha, ACC beta, int hasBias,
          int actFn, ACC actA, ACC actB) {
	__local ACC4 As[TK][PM / 4];
	__local ACC4 Bs[TK][PN / 4];
	__local ACC* as = (__local ACC*)As;
	__local ACC* bs = (__local ACC*)Bs;
	int tx = get_local_id(0), ty = get_local_id(1), tid = ty * RN + tx;
	int m0 = get_group_id(1) * TM, n0 = get_group_id(0) * TN;
	long z = get_group_id(2);
	ao += z * strA;
	bo += z * strB;
	yo += z * strY;
	ACC acc[WM][WN];
	for (int i = 0; i < WM; i++)
		for (int j = 0; j < WN; j++) acc[i][j] = 0;
	ACC ra[LA], rb[LB];
#define LOAD_TILES(k0) \
	GEMM_LOAD_TILE(ra, LA, TM, A, ao, m0, k0, M, Kd, !transA) \
	GEMM_LOAD_TILEW(rb, LB, TN, B, bo, n0, k0, N, Kd, transB)
	LOAD_TILES(0)
	for (int k0 = 0; k0 < Kd; k0 += TK) {
		GEMM_STORE_TILES(!transA, transB)
		barrier(CLK_LOCAL_MEM_FENCE);
		if (k0 + TK < Kd) {
			LOAD_TILES(k0 + TK)
		}
		MMA_STEP()
		barrier(CLK_LOCAL_MEM_FENCE);
	}
#undef LOAD_TILES
	for (int i = 0; i < WM; i++) {
		int gm = m0 + ROW(i);
		if (gm >= M) continue;
		for (int j = 0; j < WN; j++) {
			int gn = n0 + COL(j);
			if (gn >= N) continue;
			ACC v = alpha * acc[i][j];
			if (hasBias) v += beta * LD(bias, bio + (long)gm * bs0 + (long)gn * bs1);
			ST(Y, yo + (long)gm * N + gn, EPI_ACT(actFn, v, actA, actB));
		}
	}
}

#endif

// conv_gemm: for image n and group g (z = n*G + g), Y[k, p] =
// W_g[k, r] @ col[r, p] with r = (c, kh, kw), p = (oh, ow); bias, the
// residual (hasRes: Res[n, k, oh, ow] at Res + ro, rt.Conv.Res) and the
// activation in the epilogue, in that order. SY is the elements between
// the images of Y and Res (rt.Conv.ImageStrideY: Kc*OH*OW when dense).
#if !defined(ONE_KERNEL) || defined(KERNEL_conv_gemm)
__kernel __attribute__((reqd_work_group_size(RN, RM, 1)))
void conv_gemm(__global const T* X, long xo, __global const WT* W, long wo,
               __global const T* bias, long bio, __global T* Y, long yo,
               int C, int H, int Wd, int Kc, int OH, int OW, int KH, int KW,
               int SH, int SW, int PT, int PL, int DH, int DW, int G,
               int hasBias, int actFn, ACC actA, ACC actB,
               __global const T* Res, long ro, int hasRes, long SY,
               int S, __global ACC* part, long pao, __global uint* cnt, long cno) {
	__local ACC4 As[TK][PM / 4];
	__local ACC4 Bs[TK][PN / 4];
	__local ACC* as = (__local ACC*)As;
	__local ACC* bs = (__local ACC*)Bs;
	__local int last;
	int tx = get_local_id(0), ty = get_local_id(1), tid = ty * RN + tx;
	int m0 = get_group_id(1) * TM, n0 = get_group_id(0) * TN;
	int z = get_group_id(2) / S, split = get_group_id(2) % S;
	int img = z / G, g = z % G;
	int Cg = C / G, Kg = Kc / G, P = OH * OW, KK = KH * KW, R = Cg * KK;
	long xb = xo + ((long)img * C + (long)g * Cg) * H * Wd;
	long wb = wo + (long)g * Kg * R;
	ACC acc[WM][WN];
	for (int i = 0; i < WM; i++)
		for (int j = 0; j < WN; j++) acc[i][j] = 0;
	ACC ra[LA], rb[LB];
#if NT % TN == 0
	// Every element of B's tile that this work-item loads (l = tid +
	// e*NT) lies in its column tid % TN: the column's pixel, window
	// origin and bounds are computed once, and a pointwise convolution
	// (1x1, unit stride, no padding, OH = H, OW = Wd) reads X[c, p]
	// directly.
	int bp = n0 + tid % TN, bk0 = tid / TN, bok = bp < P;
	int boh = bp / OW, bow = bp - boh * OW;
	int bih0 = boh * SH - PT, biw0 = bow * SW - PL;
	int pw = KK == 1 && SH == 1 && SW == 1 && PT == 0 && PL == 0 && OH == H && OW == Wd;
	long HW = (long)H * Wd;
#define LOAD_TILES(k0) \
	GEMM_LOAD_TILEW(ra, LA, TM, W, wb, m0, k0, Kg, R, 1) \
	for (int e = 0; e < LB; e++) { \
		int r = (k0) + bk0 + e * (NT / TN); \
		ACC v = 0; \
		if (bok && r < R) { \
			if (pw) { \
				v = LD(X, xb + r * HW + bp); \
			} else { \
				int c = r / KK, rr = r - c * KK; \
				int kh = rr / KW, kw = rr - kh * KW; \
				int ih = bih0 + kh * DH, iw = biw0 + kw * DW; \
				if (ih >= 0 && ih < H && iw >= 0 && iw < Wd) v = LD(X, xb + ((long)c * H + ih) * Wd + iw); \
			} \
		} \
		rb[e] = v; \
	}
#else
#define LOAD_TILES(k0) \
	GEMM_LOAD_TILEW(ra, LA, TM, W, wb, m0, k0, Kg, R, 1) \
	for (int e = 0; e < LB; e++) { \
		int l = tid + e * NT, n = l % TN, k = l / TN; \
		int p = n0 + n, r = (k0) + k; \
		ACC v = 0; \
		if (p < P && r < R) { \
			int c = r / KK, rr = r - c * KK; \
			int kh = rr / KW, kw = rr - kh * KW; \
			int oh = p / OW, ow = p - oh * OW; \
			int ih = oh * SH - PT + kh * DH, iw = ow * SW - PL + kw * DW; \
			if (ih >= 0 && ih < H && iw >= 0 && iw < Wd) v = LD(X, xb + ((long)c * H + ih) * Wd + iw); \
		} \
		rb[e] = v; \
	}
#endif
	// Split s of S sums the reduction steps [kb, ke) (whole TK steps).
	int steps = (R + TK - 1) / TK, per = (steps + S - 1) / S;
	int kb = split * per * TK, ke = min(R, (split + 1) * per * TK);
	if (kb < ke) {
		LOAD_TILES(kb)
	}
	for (int k0 = kb; k0 < ke; k0 += TK) {
		GEMM_STORE_TILES(1, 0)
		barrier(CLK_LOCAL_MEM_FENCE);
		if (k0 + TK < ke) {
			LOAD_TILES(k0 + TK)
		}
		MMA_STEP()
		barrier(CLK_LOCAL_MEM_FENCE);
	}
#undef LOAD_TILES
	if (S > 1) {
		// Split-K: every split stores its partial tile, and the last of
		// the tile's splits to arrive sums them in split order (the same
		// result whichever arrives last), resets the tile's counter for
		// the next run and writes Y.
		long t = ((long)get_group_id(2) / S * get_num_groups(1) + get_group_id(1)) * get_num_groups(0) + get_group_id(0);
		__global ACC* pt = part + pao + t * S * (WM * WN * NT);
		for (int i = 0; i < WM; i++)
			for (int j = 0; j < WN; j++) pt[((long)split * WM * WN + i * WN + j) * NT + tid] = acc[i][j];
		mem_fence(CLK_GLOBAL_MEM_FENCE);
		barrier(CLK_GLOBAL_MEM_FENCE | CLK_LOCAL_MEM_FENCE);
		if (tid == 0) last = atomic_inc(&cnt[cno + t]) == (uint)(S - 1);
		barrier(CLK_LOCAL_MEM_FENCE);
		if (!last) return;
		mem_fence(CLK_GLOBAL_MEM_FENCE);
		volatile __global ACC* vp = pt;
		for (int i = 0; i < WM; i++)
			for (int j = 0; j < WN; j++) {
				ACC v = 0;
				for (int q = 0; q < S; q++) v += q == split ? acc[i][j] : vp[((long)q * WM * WN + i * WN + j) * NT + tid];
				acc[i][j] = v;
			}
		if (tid == 0) cnt[cno + t] = 0;
	}
	long yb = (long)img * SY + (long)g * Kg * P;
	for (int i = 0; i < WM; i++) {
		int gm = m0 + ROW(i);
		if (gm >= Kg) continue;
		ACC b0 = hasBias ? LD(bias, bio + g * Kg + gm) : (ACC)0;
		for (int j = 0; j < WN; j++) {
			int p = n0 + COL(j);
			if (p >= P) continue;
			long yi = yb + (long)gm * P + p;
			ACC v = acc[i][j] + b0;
			if (hasRes) v += LD(Res, ro + yi);
			ST(Y, yo + yi, EPI_ACT(actFn, v, actA, actB));
		}
	}
}
#endif

// gemv: a MatMul with M == 1 or N == 1 (y = x·W or W·x), built for memory
// bandwidth, where gemm's tiles would leave all but one row idle. The
// matrix W is B when M == 1 (V = A) and A otherwise (V = B); the vector V
// is contiguous along K either way. Column mode (W's element (k, j) at
// k*L + j: x·W with B not transposed, or A^T·x) gives each work-item one
// output column (x, coalesced) and strides K by the work-group's rows
// (y), four adjacent columns (one vector load) where L is a multiple of
// 4; row mode (W's element (j, k) at j*K + k) gives each row of
// work-items (y) one output and strides K by its lanes (x), four elements
// of V and of W a load (vload4, or vload_half4). The work-group
// sums its partial sums in local memory in a fixed order. With S > 1 the
// work-groups also split K into S slices (group z = batch*S + split):
// each stores its partial sums, and the last of an output group's slices
// to arrive sums them in slice order (deterministic, as conv_gemm's
// split-K) and writes Y.
#if !defined(ONE_KERNEL) || defined(KERNEL_gemv)
#define GV_X 32
#define GV_Y 8
// GV_LD4, GV_LDW4: four consecutive elements as an ACC4 (of T, and of the
// weight type WT)
#if defined(IS_HALF) && IS_HALF
#define GV_LD4(p, i) vload_half4(0, (p) + (i))
#else
#define GV_LD4(p, i) CAT(convert_, ACC4)(vload4(0, (p) + (i)))
#endif
#if defined(W_HALF) && W_HALF
#define GV_LDW4(p, i) vload_half4(0, (p) + (i))
#else
#define GV_LDW4(p, i) GV_LD4(p, i)
#endif
__kernel __attribute__((reqd_work_group_size(GV_X, GV_Y, 1)))
void gemv(__global const T* A, long ao, __global const WT* B, long bo,
          __global const T* bias, long bio, int bs0, int bs1,
          __global T* Y, long yo, int M, int N, int Kd, int transA, int transB,
          long strA, long strB, long strY, ACC alpha, ACC beta, int hasBias,
          int actFn, ACC actA, ACC actB,
          int S, __global ACC* part, long pao, __global uint* cnt, long cno) {
	__local ACC red[GV_Y][GV_X + 1];
	__local ACC4 red4[GV_Y][GV_X];
	__local int last;
	int x = get_local_id(0), y = get_local_id(1), tid = y * GV_X + x;
	int S1 = max(S, 1);
	long z = get_group_id(2);
	int split = (int)(z % S1);
	long bt = z / S1;
	ao += bt * strA;
	bo += bt * strB;
	yo += bt * strY;
	int wa = N == 1 && M != 1; // W is A
	int L = wa ? M : N;
#ifdef GV_MODE
	// split devices fix the mode at build time (matmul.go's gemvMode), so
	// that the compiler sees one path
	const int col = GV_MODE != 2, v4 = GV_MODE == 0;
#else
	int col = wa ? transA : !transB;
	int v4 = col && (L & 3) == 0;
#endif
	int nout = col ? (v4 ? 4 * GV_X : GV_X) : GV_Y; // outputs of a work-group
	int j0 = get_group_id(0) * nout;
	int per = ((Kd + S1 - 1) / S1 + 3) & ~3; // slices start at multiples of 4
	int kb = split * per, ke = min(Kd, kb + per);
	ACC s = 0;
#define GV_V(k) (wa ? LDW(B, bo + (k)) : LD(A, ao + (k)))
#define GV_W(i) (wa ? LD(A, ao + (i)) : LDW(B, bo + (i)))
#define GV_W4(i) (wa ? GV_LD4(A, ao + (i)) : GV_LDW4(B, bo + (i)))
#define GV_V4(q) (wa ? GV_LDW4(B, bo + kb + 4 * (q)) : GV_LD4(A, ao + kb + 4 * (q)))
// GV_DOT(AT, LOADW, IDX, k0, STEP, out, END, LOADV): out = the sum over
// k = k0, k0 + STEP, ... below END of LOADW(IDX(k)) * LOADV(k), in four
// accumulators of type AT (four loads in flight per work-item).
#define GV_DOT(AT, LOADW, IDX, k0, STEP, out, END, LOADV) { \
		AT s0 = 0, s1 = 0, s2 = 0, s3 = 0; \
		int k = (k0); \
		for (; k + 3 * (STEP) < (END); k += 4 * (STEP)) { \
			AT w0 = LOADW(IDX(k)), w1 = LOADW(IDX(k + (STEP))); \
			AT w2 = LOADW(IDX(k + 2 * (STEP))), w3 = LOADW(IDX(k + 3 * (STEP))); \
			s0 += w0 * LOADV(k); \
			s1 += w1 * LOADV(k + (STEP)); \
			s2 += w2 * LOADV(k + 2 * (STEP)); \
			s3 += w3 * LOADV(k + 3 * (STEP)); \
		} \
		for (; k < (END); k += (STEP)) s0 += LOADW(IDX(k)) * LOADV(k); \
		out = (s0 + s1) + (s2 + s3); \
	}
// column mode: W's element (k, j); row mode: vector q (elements kb + 4q
// to kb + 4q + 3) of the row at wb
#define GV_COLI(k) ((long)(k) * L + j)
#define GV_ROW4(q) (wb + kb + 4 * (q))
	if (v4) {
		int j = j0 + 4 * x;
		ACC4 s4 = 0;
		if (j < L) GV_DOT(ACC4, GV_W4, GV_COLI, kb + y, GV_Y, s4, ke, GV_V)
		red4[y][x] = s4;
	} else if (col) {
		int j = j0 + x;
		if (j < L) GV_DOT(ACC, GV_W, GV_COLI, kb + y, GV_Y, s, ke, GV_V)
	} else {
		// row mode: four elements of K a load (vector V and W), the
		// slice's last K % 4 elements one a work-item
		int j = j0 + y;
		long wb = (long)j * Kd;
		int n4 = max(ke - kb, 0) / 4, kt = kb + 4 * n4;
		ACC4 s4 = 0;
		if (j < L) {
			GV_DOT(ACC4, GV_W4, GV_ROW4, x, GV_X, s4, n4, GV_V4)
			if (kt + x < ke) s = GV_W(wb + kt + x) * GV_V(kt + x);
		}
		s += (s4.x + s4.y) + (s4.z + s4.w);
	}
#undef GV_V
#undef GV_W
#undef GV_W4
#undef GV_V4
#undef GV_DOT
#undef GV_COLI
#undef GV_ROW4
	red[y][x] = s;
	barrier(CLK_LOCAL_MEM_FENCE);
	// work-item tid < nout sums output j0 + tid: a column over y, or a
	// row over x, in order
	ACC v = 0;
	if (tid < nout) {
		if (v4)
			for (int i = 0; i < GV_Y; i++) v += ((__local ACC*)red4[i])[tid];
		else if (col)
			for (int i = 0; i < GV_Y; i++) v += red[i][tid];
		else
			for (int i = 0; i < GV_X; i++) v += red[tid][i];
	}
	if (S1 > 1) {
		long t = bt * get_num_groups(0) + get_group_id(0);
		__global ACC* pt = part + pao + t * S1 * (4 * GV_X);
		if (tid < nout) pt[(long)split * (4 * GV_X) + tid] = v;
		mem_fence(CLK_GLOBAL_MEM_FENCE);
		barrier(CLK_GLOBAL_MEM_FENCE | CLK_LOCAL_MEM_FENCE);
		if (tid == 0) last = atomic_inc(&cnt[cno + t]) == (uint)(S1 - 1);
		barrier(CLK_LOCAL_MEM_FENCE);
		if (!last) return;
		mem_fence(CLK_GLOBAL_MEM_FENCE);
		volatile __global ACC* vp = pt;
		if (tid < nout) {
			ACC u = 0;
			for (int q = 0; q < S1; q++) u += q == split ? v : vp[(long)q * (4 * GV_X) + tid];
			v = u;
		}
		if (tid == 0) cnt[cno + t] = 0;
	}
	int j = j0 + tid;
	if (tid < nout && j < L) {
		int gm = wa ? j : 0, gn = wa ? 0 : j;
		ACC r = alpha * v;
		if (hasBias) r += beta * LD(bias, bio + (long)gm * bs0 + (long)gn * bs1);
		ST(Y, yo + (long)gm * N + gn, EPI_ACT(actFn, r, actA, actB));
	}
}
#undef GV_X
#undef GV_Y
#undef GV_LD4
#undef GV_LDW4
#endif
