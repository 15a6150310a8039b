#!/usr/bin/python3
"""NumPy baseline for vrun's CPU benchmarks, on the same shapes.

Prints one line per case in Go's benchmark format, with the same names as
`go test -bench 'GEMM|GEMV|BLAS1|Conv2D' ./cpu`, so that compare.py can put
them side by side:

    BenchmarkGEMM/f32/n=1024   <iters>   <ns/op> ns/op   <x> GFLOP/s

The BLAS set: level 1 AXPY (y += a*x, as np.multiply into scratch and
np.add, two passes like vrun's two ops), DOT (np.dot) and NRM2
(np.linalg.norm) at n = 4096 and 2^20; level 2 GEMV (a @ x and x @ a for
an n x n matrix, n = 256 to 4096); level 3 GEMM (n = 256 to 2048), in
f32 and f64. -short runs a subset with a shorter minimum time (CI).

With -suite SPEC.json it times bench/suite's GEMM and GEMV cases instead
(the spec format of torch_baseline.py suite; convolutions and models are
left out: NumPy has neither) and prints JSON lines as that does.

Run with Debian's NumPy:  /usr/bin/python3 bench/numpy_baseline.py [-short]
(compare.py runs it with OpenBLAS first on LD_LIBRARY_PATH). The first
line names the BLAS library the process loaded.
"""
import sys

import numpy as np

import timing

short = "-short" in sys.argv
MIN_TIME = 0.1 if short else 0.5


def timeit(fn):
    return timing.timeit(fn, MIN_TIME)


def report(name, sec, n, metric, unit):
    print(f"Benchmark{name}\t{n}\t{sec * 1e9:.0f} ns/op\t{metric:.3f} {unit}", flush=True)


def blas_library():
    libs = set()
    with open("/proc/self/maps") as f:
        for line in f:
            p = line.split()[-1]
            if "blas" in p.lower():
                libs.add(p)
    return ", ".join(sorted(libs)) or "unknown"


def suite(path):
    import json
    import os
    spec = json.load(open(path))
    bounds = dict(min_time=spec["min_time"], min_runs=spec["min_runs"], max_runs=spec["max_runs"])
    libs = ", ".join(sorted(os.path.basename(p) for p in blas_library().split(", ")))
    print(json.dumps({"version": np.__version__, "device": f"{spec['threads']} threads, {libs}"}), flush=True)
    rng = np.random.default_rng(1)

    def emit(kind, case, fn):
        sec, runs = timing.median_time(fn, **bounds)
        print(json.dumps({"kind": kind, "case": case, "impl": "numpy", "ms": sec * 1e3, "runs": runs}), flush=True)

    for c in (spec.get("gemm") or []):
        n = c["n"]
        a = rng.uniform(-1, 1, (n, n)).astype(np.float32)
        b = rng.uniform(-1, 1, (n, n)).astype(np.float32)
        y = np.empty((n, n), np.float32)
        emit("gemm", c["case"], lambda: np.matmul(a, b, out=y))
    for c in (spec.get("gemv") or []):
        k, n = c["k"], c["n"]
        x = rng.uniform(-1, 1, k).astype(np.float32)
        y = np.empty(n, np.float32)
        if c["form"] == "xA":
            w = rng.uniform(-1, 1, (k, n)).astype(np.float32)
            emit("gemv", c["case"], lambda: np.matmul(x, w, out=y))
        else:
            w = rng.uniform(-1, 1, (n, k)).astype(np.float32)
            emit("gemv", c["case"], lambda: np.matmul(w, x, out=y))


if "-suite" in sys.argv:
    suite(sys.argv[sys.argv.index("-suite") + 1])
    sys.exit(0)

print(f"# numpy {np.__version__}, BLAS: {blas_library()}", flush=True)
rng = np.random.default_rng(1)
DTYPES = ((np.float32, "f32"), (np.float64, "f64"))

for dt, tag in DTYPES:
    for n in ((1 << 20,) if short else (4096, 1 << 20)):
        x = rng.uniform(-1, 1, n).astype(dt)
        y = rng.uniform(-1, 1, n).astype(dt)
        t = np.empty(n, dt)
        sz = x.itemsize * n

        def axpy():
            np.multiply(x, dt(0.5), out=t)
            np.add(y, t, out=y)
        sec, it = timeit(axpy)
        report(f"BLAS1/AXPY/{tag}/n={n}", sec, it, 3 * sz / sec / 1e9, "GB/s")
        sec, it = timeit(lambda: np.dot(x, y))
        report(f"BLAS1/DOT/{tag}/n={n}", sec, it, 2 * sz / sec / 1e9, "GB/s")
        sec, it = timeit(lambda: np.linalg.norm(x))
        report(f"BLAS1/NRM2/{tag}/n={n}", sec, it, sz / sec / 1e9, "GB/s")

for dt, tag in DTYPES:
    for n in ((256, 1024) if short else (256, 512, 1024, 2048, 4096)):
        a = rng.uniform(-1, 1, (n, n)).astype(dt)
        x = rng.uniform(-1, 1, n).astype(dt)
        y = np.empty(n, dt)
        for form, fn in (("Ax", lambda: np.matmul(a, x, out=y)), ("xA", lambda: np.matmul(x, a, out=y))):
            sec, it = timeit(fn)
            report(f"GEMV/{tag}/n={n}/{form}", sec, it, a.nbytes / sec / 1e9, "GB/s")

for dt, tag in DTYPES:
    for n in ((256, 1024) if short else (256, 512, 1024, 2048)):
        a = rng.uniform(-1, 1, (n, n)).astype(dt)
        b = rng.uniform(-1, 1, (n, n)).astype(dt)
        c = np.empty((n, n), dt)
        sec, it = timeit(lambda: np.matmul(a, b, out=c))
        report(f"GEMM/{tag}/n={n}", sec, it, 2 * n**3 / sec / 1e9, "GFLOP/s")

if short:
    sys.exit(0)


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
