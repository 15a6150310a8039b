#version 450
#extension GL_GOOGLE_include_directive : require
// optim: rt.OptimStep, the optimizer update of n parameters in place (SGD,
// Adam/AdamW, AdaGrad, RMSProp, with an optional clipping scale), one
// invocation per parameter (grid-stride), in the parameters' dtype (CT is
// float for f32, double for f64). The math and the order of its roundings
// are rt.OptimStep's doc comment. Absent operands are bound to P and never
// read.
#define RANK 1
#define NOPS 1
#include "common.glsl"

// rt.OptimFn, the slots of H and the flag bits of rt.OptimStep.Flags
// (rt/optim.go; rt/vulkan's TestOptimShaderConstants checks them).
#define FN_SGD 0u
#define FN_ADAM 1u
#define FN_ADAGRAD 2u
#define FN_RMSPROP 3u
#define H_LR 0u
#define H_FIRST 1u
#define H_STEPSIZE 2u
#define H_BC2SQRT 3u
#define H_DECAY 4u
#define F_SCALE 1u
#define F_WD 2u
#define F_MOMENTUM 4u
#define F_NESTEROV 8u
#define F_DECOUPLED 16u
#define F_CENTERED 32u

// c: rt.OptimStep.Coefs as raw bits (c[4] eps, c[5] weight decay).
layout(push_constant) uniform PC {
	uint n, fn, flags, pad0;
	uint offP, offG, offS1, offS2, offS3, offH, offScale, pad1;
	uvec2 c[6];
} pc;
layout(std430, binding = 0) buffer BP { X_T p[]; };
layout(std430, binding = 1) buffer BG { X_T g[]; };
layout(std430, binding = 2) buffer BS1 { X_T s1[]; };
layout(std430, binding = 3) buffer BS2 { X_T s2[]; };
layout(std430, binding = 4) buffer BS3 { X_T s3[]; };
layout(std430, binding = 5) readonly buffer BH { X_T h[]; };
layout(std430, binding = 6) readonly buffer BC { X_T sc[]; };

bool has(uint f) { return (pc.flags & f) != 0u; }

void main() {
	CT c0 = pc_real(pc.c[0]), c1 = pc_real(pc.c[1]), c2 = pc_real(pc.c[2]), c3 = pc_real(pc.c[3]);
	CT eps = pc_real(pc.c[4]), wd = pc_real(pc.c[5]);
	CT lr = CT(h[pc.offH + H_LR]);
	bool first = CT(h[pc.offH + H_FIRST]) != CT(0);
	CT scale = has(F_SCALE) ? CT(sc[pc.offScale]) : CT(1);
	GRID_LOOP(i, pc.n) {
		CT pi = CT(p[pc.offP + i]);
		CT gi = CT(g[pc.offG + i]);
		if (has(F_SCALE)) {
			gi = gi * scale;
			g[pc.offG + i] = X_T(gi);
		}
		if (has(F_WD)) gi = gi + wd * pi;
		if (pc.fn == FN_SGD) {
			if (has(F_MOMENTUM)) {
				CT b = first ? gi : CT(s1[pc.offS1 + i]) * c0 + c1 * gi;
				s1[pc.offS1 + i] = X_T(b);
				gi = has(F_NESTEROV) ? gi + c0 * b : b;
			}
			p[pc.offP + i] = X_T(pi - lr * gi);
		} else if (pc.fn == FN_ADAM) {
			if (has(F_DECOUPLED)) pi = pi * CT(h[pc.offH + H_DECAY]);
			CT m = CT(s1[pc.offS1 + i]) * c0 + c1 * gi;
			CT v = CT(s2[pc.offS2 + i]) * c2 + c3 * gi * gi;
			s1[pc.offS1 + i] = X_T(m);
			s2[pc.offS2 + i] = X_T(v);
			CT d = sqrt(v) / CT(h[pc.offH + H_BC2SQRT]) + eps;
			p[pc.offP + i] = X_T(pi - CT(h[pc.offH + H_STEPSIZE]) * (m / d));
		} else if (pc.fn == FN_ADAGRAD) {
			CT s = CT(s1[pc.offS1 + i]) + gi * gi;
			s1[pc.offS1 + i] = X_T(s);
			p[pc.offP + i] = X_T(pi - lr * (gi / (sqrt(s) + eps)));
		} else {
			CT q = CT(s1[pc.offS1 + i]) * c0 + c1 * gi * gi;
			s1[pc.offS1 + i] = X_T(q);
			CT d;
			if (has(F_CENTERED)) {
				CT a = CT(s2[pc.offS2 + i]) * c0 + c1 * gi;
				s2[pc.offS2 + i] = X_T(a);
				d = sqrt(q - a * a);
			} else {
				d = sqrt(q);
			}
			d = d + eps;
			if (has(F_MOMENTUM)) {
				CT b = CT(s3[pc.offS3 + i]) * c2 + gi / d;
				s3[pc.offS3 + i] = X_T(b);
				p[pc.offP + i] = X_T(pi - lr * b);
			} else {
				p[pc.offP + i] = X_T(pi - lr * (gi / d));
			}
		}
	}
}
