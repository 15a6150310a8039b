// conv.cl: direct kernels, one work-item per output element: Conv for
// few output channels per group (depthwise), ConvTranspose and Pool.

// conv_direct: one work-item per output (x: ow, y: oh, z: image*K + k),
// for convolutions with few output channels per group (depthwise): no
// integer division in the index math, weights of one channel shared by
// the work-group's rows. hasRes adds the residual Res[ro + the output's
// index] (rt.Conv.Res) before the activation. SY is the elements between
// the images of Y and Res (rt.Conv.ImageStrideY: Kc*OH*OW when dense).
#if !defined(ONE_KERNEL) || defined(KERNEL_conv_direct)
__kernel void conv_direct(__global const T* X, long xo, __global const WT* W, long wo,
                          __global const T* bias, long bio, __global T* Y, long yo,
                          int C, int H, int Wd, int Kc, int OH, int OW, int KH, int KW,
                          int SH, int SW, int PT, int PL, int DH, int DW, int G,
                          int hasBias, int actFn, ACC actA, ACC actB,
                          __global const T* Res, long ro, int hasRes, long SY) {
	int ow = get_global_id(0), oh = get_global_id(1);
	if (ow >= OW || oh >= OH) return;
	int z = get_global_id(2);
	int img = z / Kc, k = z - img * Kc;
	int Cg = C / G, Kg = Kc / G, g = k / Kg;
	ACC s = hasBias ? LD(bias, bio + k) : (ACC)0;
	long wb = wo + (long)k * Cg * KH * KW;
	int ih0 = oh * SH - PT, iw0 = ow * SW - PL;
	for (int c = 0; c < Cg; c++) {
		long xb = xo + ((long)img * C + g * Cg + c) * (long)H * Wd;
		for (int kh = 0; kh < KH; kh++) {
			int ih = ih0 + kh * DH;
			if (ih < 0 || ih >= H) continue;
			long xr = xb + (long)ih * Wd;
			long wr = wb + ((long)c * KH + kh) * KW;
			for (int kw = 0; kw < KW; kw++) {
				int iw = iw0 + kw * DW;
				if (iw >= 0 && iw < Wd) s = fma(LD(X, xr + iw), LDW(W, wr + kw), s);
			}
		}
	}
	long yi = (long)img * SY + ((long)k * OH + oh) * OW + ow;
	if (hasRes) s += LD(Res, ro + yi);
	ST(Y, yo + yi, act(actFn, s, actA, actB));
}
#endif

// convt: Y[n,k,oh,ow] = bias[k] + sum X[n,c,ih,iw] * W[c,k%Kg,kh,kw]
// over oh = ih*SH - PT + kh*DH, ow likewise, c in k's group.
#if !defined(ONE_KERNEL) || defined(KERNEL_convt)
__kernel void convt(long total, __global const T* X, long xo, __global const T* W, long wo,
                    __global const T* bias, long bio, __global T* Y, long yo,
                    int C, int H, int Wd, int Kc, int OH, int OW, int KH, int KW,
                    int SH, int SW, int PT, int PL, int DH, int DW, int G, int hasBias) {
	long gid = get_global_id(0);
	if (gid >= total) return;
	int ow = gid % OW;
	long t = gid / OW;
	int oh = t % OH;
	t /= OH;
	int k = t % Kc;
	long img = t / Kc;
	int Cg = C / G, Kg = Kc / G, g = k / Kg, kk = k - g * Kg;
	ACC s = hasBias ? LD(bias, bio + k) : (ACC)0;
	for (int kh = 0; kh < KH; kh++) {
		int th = oh + PT - kh * DH;
		if (th < 0 || th % SH != 0) continue;
		int ih = th / SH;
		if (ih >= H) continue;
		for (int kw = 0; kw < KW; kw++) {
			int tw = ow + PL - kw * DW;
			if (tw < 0 || tw % SW != 0) continue;
			int iw = tw / SW;
			if (iw >= Wd) continue;
			for (int c = 0; c < Cg; c++) {
				int ci = g * Cg + c;
				ACC xv = LD(X, xo + ((img * C + ci) * (long)H + ih) * Wd + iw);
				ACC wv = LD(W, wo + (((long)ci * Kg + kk) * KH + kh) * KW + kw);
				s = fma(xv, wv, s);
			}
		}
	}
	ST(Y, yo + gid, s);
}
#endif

// pad_count is the number of taps start + t*dil (t < k) inside [lo, hi).
inline int pad_count(int start, int dil, int k, int lo, int hi) {
	int c = 0;
	for (int t = 0; t < k; t++) {
		int p = start + t * dil;
		if (p >= lo && p < hi) c++;
	}
	return c;
}

// pool: fn 0 max, 1 avg, 2 Lp (as rt.PoolFn).
#if !defined(ONE_KERNEL) || defined(KERNEL_pool)
__kernel void pool(long total, __global const T* X, long xo, __global T* Y, long yo,
                   int H, int Wd, int OH, int OW, int KH, int KW, int SH, int SW,
                   int PT, int PL, int PB, int PR, int DH, int DW, int fn, int incl, int P) {
	long gid = get_global_id(0);
	if (gid >= total) return;
	int ow = gid % OW;
	long t = gid / OW;
	int oh = t % OH;
	long c = t / OH;
	long xb = xo + c * (long)H * Wd;
	int hs = oh * SH - PT, ws = ow * SW - PL;
	// One pass over the window's taps inside the input: the max (fn 0), or
	// the sum of the values or of their P-th powers and the count.
	ACC m = -INFINITY, s = 0;
	int cnt = 0;
	for (int kh = 0; kh < KH; kh++) {
		int ih = hs + kh * DH;
		if (ih < 0 || ih >= H) continue;
		for (int kw = 0; kw < KW; kw++) {
			int iw = ws + kw * DW;
			if (iw < 0 || iw >= Wd) continue;
			ACC v = LD(X, xb + (long)ih * Wd + iw);
			cnt++;
			if (fn == 0) {
				if (v > m || ISNAN(v)) m = v;
			} else if (fn == 1) s += v;
			else if (P == 1) s += fabs(v);
			else if (P == 2) s += v * v;
			else s += pow(fabs(v), (ACC)P);
		}
	}
	ACC r;
	if (fn == 0) r = m;
	else if (fn == 1) {
		if (incl) cnt = pad_count(hs, DH, KH, -PT, H + PB) * pad_count(ws, DW, KW, -PL, Wd + PR);
		r = cnt > 0 ? s / (ACC)cnt : (ACC)0;
	} else if (P == 1) r = s;
	else if (P == 2) r = sqrt(s);
	else r = pow(s, (ACC)1 / (ACC)P);
	ST(Y, yo + gid, r);
}
#endif
