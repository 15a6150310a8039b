#!/usr/bin/python3
"""Run vrun's CPU benchmarks and the NumPy baseline in one go and print
them side by side with the ratio (vrun / NumPy; above 1 means vrun is
faster). Ratios are what count: these machines are noisy.

    /usr/bin/python3 bench/compare.py [-benchtime 1s] [-threads 2] [-short] [-bench REGEXP]

The set: BLAS level 1 (AXPY, DOT, NRM2), level 2 (GEMV) and level 3
(GEMM) in f32 and f64, and two convolutions (see numpy_baseline.py).
-short (CI) runs a subset with -benchtime 0.1s. -threads N sets
GOMAXPROCS for vrun (go test -cpu N) and OPENBLAS_NUM_THREADS for NumPy
(default: 2). With -rounds N (default 3, 1 with -short) the Go and NumPy
runs alternate N times and each side keeps its best throughput (on a
shared machine, the least disturbed run).

Debian's NumPy loads libblas.so.3, which may be the reference BLAS: when
OpenBLAS is installed (apt-get install libopenblas0-pthread) the NumPy
process runs with its directory first on LD_LIBRARY_PATH, whatever the
system's BLAS alternative (only that process; nothing system-wide
changes). The header names the BLAS NumPy loaded. OPENBLAS_CORETYPE and
OPENBLAS_L2_SIZE are cleared for the NumPy run, so that OpenBLAS picks
its best kernel.
"""
import os
import re
import subprocess
import sys

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
args = sys.argv[1:]
short = "-short" in args
benchtime = args[args.index("-benchtime") + 1] if "-benchtime" in args else ("0.1s" if short else "1s")
rounds = int(args[args.index("-rounds") + 1]) if "-rounds" in args else (1 if short else 3)
threads = args[args.index("-threads") + 1] if "-threads" in args else "2"
# Go matches -bench per /-separated level, so the short set takes two runs.
patterns = [args[args.index("-bench") + 1]] if "-bench" in args else (
    ["^BenchmarkBLAS1$/^(AXPY|DOT|NRM2)$/^(f32|f64)$/^n=1048576$",
     "^Benchmark(GEMV|GEMM)$/^(f32|f64)$/^n=(256|1024)$"] if short else ["^Benchmark(GEMM|GEMV|BLAS1|Conv2D)$"])
if subprocess.run(["/usr/bin/python3", "-c", "import numpy"], capture_output=True).returncode != 0:
    print("bench/compare.py: skipped: /usr/bin/python3 has no NumPy (apt-get install python3-numpy)")
    sys.exit(0)
OPENBLAS = "/usr/lib/x86_64-linux-gnu/openblas-pthread"
line = re.compile(r"^Benchmark(\S+?)(?:-\d+)?\s+\d+\s+([\d.]+) ns/op(?:\s+([\d.]+) (GFLOP/s|GB/s))?")


def parse(text):
    out = {}
    for l in text.splitlines():
        m = line.match(l)
        if m and m.group(3):
            out[m.group(1)] = (float(m.group(3)), m.group(4))
    return out


env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")}
env["OPENBLAS_NUM_THREADS"] = threads
env["OMP_NUM_THREADS"] = threads
if os.path.isdir(OPENBLAS):
    env["LD_LIBRARY_PATH"] = OPENBLAS + os.pathsep + env.get("LD_LIBRARY_PATH", "")


def best(acc, new):
    for k, (v, unit) in new.items():
        if k not in acc or v > acc[k][0]:
            acc[k] = (v, unit)


g, n, npyout = {}, {}, ""
for _ in range(rounds):
    for pattern in patterns:
        go = subprocess.run(["go", "test", "-run", "^$", "-bench", pattern, "-benchtime", benchtime, "-cpu", threads, "./cpu"],
                            cwd=root, capture_output=True, text=True)
        if go.returncode != 0:
            sys.exit(go.stdout + go.stderr)
        best(g, parse(go.stdout))
    npy = subprocess.run(["/usr/bin/python3", os.path.join(root, "bench", "numpy_baseline.py")] + (["-short"] if short else []),
                         env=env, capture_output=True, text=True, check=True)
    npyout = npy.stdout
    best(n, parse(npy.stdout))
header = next((l[2:] for l in npyout.splitlines() if l.startswith("# ")), "")
try:
    load = " ".join(open("/proc/loadavg").read().split()[:3])
except OSError:
    load = "?"
print(f"vrun cpu vs {header}; {threads} threads each; best of {rounds} rounds; load average {load}")
print(f"{'benchmark':44} {'vrun':>10} {'numpy':>10} {'unit':8} {'vrun/numpy':>10}")
for name in g:
    if name in n:
        (gv, unit), (nv, _) = g[name], n[name]
        print(f"{name:44} {gv:10.2f} {nv:10.2f} {unit:8} {gv / nv:10.2f}")
