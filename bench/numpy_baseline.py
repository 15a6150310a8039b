#!/usr/bin/python3
"""NumPy baseline for vrun's CPU benchmarks, on the same shapes.

Prints one line per case in Go's benchmark format, with the same names as
`go test -bench . ./cpu`, so that compare.py can put them side by side:

    BenchmarkGEMM/f32/n=1024   <iters>   <ns/op> ns/op   <x> GFLOP/s

Run with Debian's NumPy:  /usr/bin/python3 bench/numpy_baseline.py
"""
import time

import numpy as np


def timeit(fn, min_time=0.5):
    fn()  # warm up
    n, start = 0, time.perf_counter()
    while True:
        fn()
        n += 1
        el = time.perf_counter() - start
        if el >= min_time and n >= 3:
            return el / n, n


def report(name, sec, n, metric, unit):
    print(f"Benchmark{name}\t{n}\t{sec * 1e9:.0f} ns/op\t{metric:.2f} {unit}", flush=True)


rng = np.random.default_rng(1)
for dt, tag in ((np.float32, "f32"), (np.float64, "f64")):
    for n in (256, 512, 1024, 2048):
        a = rng.uniform(-1, 1, (n, n)).astype(dt)
        b = rng.uniform(-1, 1, (n, n)).astype(dt)
        c = np.empty((n, n), dt)
        sec, it = timeit(lambda: np.matmul(a, b, out=c))
        report(f"GEMM/{tag}/n={n}", sec, it, 2 * n**3 / sec / 1e9, "GFLOP/s")

n = 4096
a = rng.uniform(-1, 1, (n, n)).astype(np.float32)
x = rng.uniform(-1, 1, n).astype(np.float32)
for tb, m in (("false", a), ("true", a.T)):
    sec, it = timeit(lambda: m @ x)
    report(f"GEMV/f32/4096x4096/transB={tb}", sec, it, 4 * n * n / sec / 1e9, "GB/s")


def conv3x3(x, w, groups):
    """Conv 3x3, pad 1, stride 1, NCHW, through im2col + matmul (NumPy has no conv)."""
    n, c, h, wd = x.shape
    k = w.shape[0]
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    cols = np.lib.stride_tricks.sliding_window_view(xp, (3, 3), axis=(2, 3))  # n,c,h,w,3,3
    if groups == 1:
        cols = cols.transpose(0, 2, 3, 1, 4, 5).reshape(n * h * wd, c * 9)
        return (cols @ w.reshape(k, -1).T).reshape(n, h, wd, k).transpose(0, 3, 1, 2)
    # depthwise
    return np.einsum("nchwij,cij->nchw", cols, w[:, 0], optimize=True)


H = 56
for name, groups in (("resnet3x3/1x64x56x56", 1), ("depthwise3x3/1x64x56x56", 64)):
    xx = rng.uniform(-1, 1, (1, 64, H, H)).astype(np.float32)
    ww = rng.uniform(-1, 1, (64, 64 // groups, 3, 3)).astype(np.float32)
    sec, it = timeit(lambda: conv3x3(xx, ww, groups))
    report(f"Conv2D/{name}", sec, it, 2 * 64 * (64 // groups) * 9 * H * H / sec / 1e9, "GFLOP/s")
