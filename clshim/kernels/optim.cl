// optim.cl: rt.OptimStep, the optimizer update of n parameters in place
// (SGD, Adam/AdamW, AdaGrad, RMSProp, with an optional clipping scale),
// one work-item per parameter, in the parameters' dtype (ACC is T: float
// or double). The math and the order of its roundings are rt.OptimStep's
// doc comment. The host defines OPT_<rule>, OPT_H_* (slots of H) and
// OPT_F_* (flag bits) from package rt. Absent operands are NULL and never
// read.
#if IS_FLOAT && !IS_HALF
__kernel void optim_step(long n, int fn, int flags,
                         __global T* P, long po, __global T* G, long go,
                         __global T* S1, long s1o, __global T* S2, long s2o, __global T* S3, long s3o,
                         __global const T* H, long ho, __global const T* Sc, long sco,
                         ACC c0, ACC c1, ACC c2, ACC c3, ACC eps, ACC wd) {
	long i = get_global_id(0);
	if (i >= n) return;
	ACC lr = H[ho + OPT_H_LR];
	ACC p = P[po + i], g = G[go + i];
	if (flags & OPT_F_SCALE) {
		g = g * Sc[sco];
		G[go + i] = g;
	}
	if (flags & OPT_F_WD) g = g + wd * p;
	if (fn == OPT_SGD) {
		if (flags & OPT_F_MOMENTUM) {
			ACC b = H[ho + OPT_H_FIRST] != 0 ? g : S1[s1o + i] * c0 + c1 * g;
			S1[s1o + i] = b;
			g = (flags & OPT_F_NESTEROV) ? g + c0 * b : b;
		}
		P[po + i] = p - lr * g;
	} else if (fn == OPT_Adam) {
		if (flags & OPT_F_DECOUPLED) p = p * H[ho + OPT_H_DECAY];
		ACC m = S1[s1o + i] * c0 + c1 * g;
		ACC v = S2[s2o + i] * c2 + c3 * g * g;
		S1[s1o + i] = m;
		S2[s2o + i] = v;
		ACC d = sqrt(v) / H[ho + OPT_H_BC2SQRT] + eps;
		P[po + i] = p - H[ho + OPT_H_STEPSIZE] * (m / d);
	} else if (fn == OPT_AdaGrad) {
		ACC s = S1[s1o + i] + g * g;
		S1[s1o + i] = s;
		P[po + i] = p - lr * (g / (sqrt(s) + eps));
	} else {
		ACC q = S1[s1o + i] * c0 + c1 * g * g;
		S1[s1o + i] = q;
		ACC d;
		if (flags & OPT_F_CENTERED) {
			ACC a = S2[s2o + i] * c0 + c1 * g;
			S2[s2o + i] = a;
			d = sqrt(q - a * a);
		} else {
			d = sqrt(q);
		}
		d = d + eps;
		if (flags & OPT_F_MOMENTUM) {
			ACC b = S3[s3o + i] * c2 + g / d;
			S3[s3o + i] = b;
			P[po + i] = p - lr * b;
		} else {
			P[po + i] = p - lr * (g / d);
		}
	}
}
#endif
