#!/usr/bin/python3
"""Reference data for vrun's end-to-end model tests, computed by NumPy.

Run with Debian's Python:  /usr/bin/python3 testdata/e2e/gen.py

For each model (mlp, cnn) it writes the weights, a random input and the
expected output, computed in float64, as .npy files in testdata/e2e/<model>/.
`go generate ./testdata/e2e` then builds <model>.bin from them with
model.Builder; engine tests check both against these outputs.
"""
import os

import numpy as np

here = os.path.dirname(os.path.abspath(__file__))
rng = np.random.default_rng(20261202)


def rand(*shape, lo=0.1, hi=1.0):
    """Random values with random signs, never zero."""
    mag = rng.uniform(lo, hi, size=shape)
    sign = rng.choice([-1.0, 1.0], size=shape)
    # Round to float32 so that the float64 reference sees exactly the
    # values the model stores.
    return (mag * sign).astype(np.float32).astype(np.float64)


def save(model, **arrays):
    d = os.path.join(here, model)
    os.makedirs(d, exist_ok=True)
    for name, a in arrays.items():
        np.save(os.path.join(d, name + ".npy"), a)


def erf(x):
    # Abramowitz-Stegun is not exact enough; use math.erf elementwise.
    import math
    return np.vectorize(math.erf)(x)


def softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


# MLP: x[5,37] -> Gemm(64) -> Gelu -> Gemm(23, transB) -> LayerNorm -> Softmax
x = rand(5, 37)
w1, b1 = rand(37, 64, hi=0.3), rand(64)
w2, b2 = rand(23, 64, hi=0.3), rand(23)
g, beta = rand(23), rand(23)
h = x @ w1 + b1
h = 0.5 * h * (1 + erf(h / np.sqrt(2)))
h = h @ w2.T + b2
mu = h.mean(-1, keepdims=True)
var = ((h - mu) ** 2).mean(-1, keepdims=True)
h = (h - mu) / np.sqrt(var + 1e-5) * g + beta
y = softmax(h)
f = np.float32
save("mlp", x=x.astype(f), w1=w1.astype(f), b1=b1.astype(f), w2=w2.astype(f), b2=b2.astype(f),
     ln_g=g.astype(f), ln_b=beta.astype(f), y=y.astype(f))


def conv2d(x, w, b, stride, pads, dil, groups):
    """Direct float64 convolution, NCHW, pads = (top, left, bottom, right)."""
    n, c, hh, ww = x.shape
    k, cg, kh, kw = w.shape
    t, l, bo, r = pads
    xp = np.zeros((n, c, hh + t + bo, ww + l + r))
    xp[:, :, t:t + hh, l:l + ww] = x
    oh = (hh + t + bo - dil[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (ww + l + r - dil[1] * (kw - 1) - 1) // stride[1] + 1
    out = np.zeros((n, k, oh, ow))
    kpg = k // groups
    for o in range(k):
        gi = o // kpg
        for i in range(oh):
            for j in range(ow):
                patch = xp[:, gi * cg:(gi + 1) * cg,
                           i * stride[0]: i * stride[0] + dil[0] * (kh - 1) + 1: dil[0],
                           j * stride[1]: j * stride[1] + dil[1] * (kw - 1) + 1: dil[1]]
                out[:, o, i, j] = (patch * w[o]).sum(axis=(1, 2, 3))
        if b is not None:
            out[:, o] += b[o]
    return out


def maxpool(x, k, s):
    n, c, hh, ww = x.shape
    oh, ow = (hh - k) // s + 1, (ww - k) // s + 1
    out = np.empty((n, c, oh, ow))
    for i in range(oh):
        for j in range(ow):
            out[:, :, i, j] = x[:, :, i * s:i * s + k, j * s:j * s + k].max(axis=(2, 3))
    return out


# CNN: x[2,3,15,13] -> Conv(8,3x3,pad 1) -> BatchNorm -> Relu -> MaxPool(2)
#   -> Conv(8, 3x3, stride 2, pads (1,0,2,1), dilation 1, groups 2) + bias -> Relu
#   -> depthwise Conv(3x3, dilation 2, pad 2) -> Relu
#   -> GlobalAveragePool -> Flatten -> Gemm(10) -> Softmax
x = rand(2, 3, 15, 13)
c1w, c1b = rand(8, 3, 3, 3, hi=0.5), rand(8)
bn_s, bn_b, bn_m, bn_v = rand(8), rand(8), rand(8), rng.uniform(0.5, 2.0, size=8).astype(np.float32).astype(np.float64)
c2w, c2b = rand(8, 4, 3, 3, hi=0.5), rand(8)
c3w = rand(8, 1, 3, 3, hi=0.5)
fw, fb = rand(10, 8), rand(10)
h = conv2d(x, c1w, c1b, (1, 1), (1, 1, 1, 1), (1, 1), 1)
h = (h - bn_m[None, :, None, None]) / np.sqrt(bn_v[None, :, None, None] + 1e-5) * bn_s[None, :, None, None] + bn_b[None, :, None, None]
h = np.maximum(h, 0)
h = maxpool(h, 2, 2)
h = np.maximum(conv2d(h, c2w, c2b, (2, 2), (1, 0, 2, 1), (1, 1), 2), 0)
h = np.maximum(conv2d(h, c3w, None, (1, 1), (2, 2, 2, 2), (2, 2), 8), 0)
h = h.mean(axis=(2, 3))
y = softmax(h @ fw.T + fb)
save("cnn", x=x.astype(f), c1w=c1w.astype(f), c1b=c1b.astype(f), bn_s=bn_s.astype(f), bn_b=bn_b.astype(f),
     bn_m=bn_m.astype(f), bn_v=bn_v.astype(f), c2w=c2w.astype(f), c2b=c2b.astype(f), c3w=c3w.astype(f),
     fw=fw.astype(f), fb=fb.astype(f), y=y.astype(f))
print("wrote mlp and cnn reference data")
