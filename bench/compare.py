#!/usr/bin/python3
"""Run vrun's CPU benchmarks and the NumPy baseline in one go and print
them side by side with the ratio (vrun / NumPy; above 1 means vrun is
faster). Ratios are what count: these machines are noisy.

    /usr/bin/python3 bench/compare.py [-benchtime 1s]

OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE are cleared for the NumPy run only,
so that a current OpenBLAS picks its best kernel.
"""
import os
import re
import subprocess
import sys

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
benchtime = sys.argv[sys.argv.index("-benchtime") + 1] if "-benchtime" in sys.argv else "1s"
line = re.compile(r"^Benchmark(\S+?)(?:-\d+)?\s+\d+\s+([\d.]+) ns/op(?:\s+([\d.]+) (GFLOP/s|GB/s))?")


def parse(text):
    out = {}
    for l in text.splitlines():
        m = line.match(l)
        if m and m.group(3):
            out[m.group(1)] = (float(m.group(3)), m.group(4))
    return out


go = subprocess.run(["go", "test", "-run", "^$", "-bench", "GEMM|GEMV|Conv2D", "-benchtime", benchtime, "./cpu"],
                    cwd=root, capture_output=True, text=True)
if go.returncode != 0:
    sys.exit(go.stdout + go.stderr)
env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")}
npy = subprocess.run(["/usr/bin/python3", os.path.join(root, "bench", "numpy_baseline.py")],
                     env=env, capture_output=True, text=True, check=True)
g, n = parse(go.stdout), parse(npy.stdout)
print(f"{'benchmark':44} {'vrun':>10} {'numpy':>10} {'unit':8} {'vrun/numpy':>10}")
for name in g:
    if name in n:
        (gv, unit), (nv, _) = g[name], n[name]
        print(f"{name:44} {gv:10.2f} {nv:10.2f} {unit:8} {gv / nv:10.2f}")
