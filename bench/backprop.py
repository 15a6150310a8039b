#!/usr/bin/python3
"""MLP backprop benchmark (issue 9, item 7): vrun, PyTorch and NumPy side
by side in one run.

The network is Linear-ReLU-Linear with the sum-of-squares loss
sum((y - target)^2). Each size is timed two ways: forward + backward (the
gradients of both weights and both biases), and one full SGD step
(forward + backward + update). Sizes: batch 64 784-256-10, batch 256
1024-1024-10 and batch 1024 4096-4096-1024, in f32 and f64.

  vrun     go test -bench MLPBackprop ./engine (engine.Trainer, CPU backend:
           the step is planned once and replayed)
  torch    Debian's PyTorch on the CPU (torch.nn.Linear, autograd,
           torch.optim.SGD)
  numpy    the same step written by hand: GEMMs through OpenBLAS,
           in-place updates

Run with Debian's Python:

    /usr/bin/python3 bench/backprop.py [-benchtime 2s] [-small | -sizes 0,1,2] [-threads N] [-rounds N]

-sizes picks sizes by index (0, 1, 2 in the order above); -small is
-sizes 0,1 and skips the batch-1024 size (about 95 GFLOP per step: seconds per
iteration on a 2-core machine). Times are the mean over at least
-benchtime of iterations after warm-up, in ms; with -rounds N the Go and
Python runs alternate N times and each time is the best of its N means
(on a shared machine the minimum is the least disturbed); the ratio columns are
vrun's time over the other's (below 1 means vrun is faster).
OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE are cleared for the Python side so
that OpenBLAS picks its best kernel, as in bench/compare.py. Debian's NumPy
and PyTorch load libblas.so.3, which may be the reference BLAS: when
OpenBLAS is installed (apt-get install libopenblas0-pthread) the Python side
runs with its directory first on LD_LIBRARY_PATH, whatever the system's
BLAS alternative; the header says which BLAS each side loaded and the load
average (the numbers mean little on a loaded machine).
"""
import os
import re
import subprocess
import sys

import timing

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
args = sys.argv[1:]
benchtime = args[args.index("-benchtime") + 1] if "-benchtime" in args else "2s"
small = "-small" in args
threads = int(args[args.index("-threads") + 1]) if "-threads" in args else os.cpu_count()
rounds = int(args[args.index("-rounds") + 1]) if "-rounds" in args else 1
if "-worker" in args:
    os.environ["OMP_NUM_THREADS"] = str(threads)
    os.environ["OPENBLAS_NUM_THREADS"] = str(threads)

OPENBLAS = "/usr/lib/x86_64-linux-gnu/openblas-pthread"
SIZES = [(64, 784, 256, 10), (256, 1024, 1024, 10), (1024, 4096, 4096, 1024)]
if small:
    SIZES = SIZES[:2]
if "-sizes" in args:  # e.g. -sizes 2: the large size alone
    SIZES = [SIZES[int(i)] for i in args[args.index("-sizes") + 1].split(",")]


def size_name(s):
    return f"b{s[0]}_{s[1]}-{s[2]}-{s[3]}"


def seconds(s):
    """-benchtime as (seconds, 0), or (0, iterations) for Go's Nx form."""
    if re.fullmatch(r"\d+x", s):
        return 0.0, int(s[:-1])
    m = re.fullmatch(r"([\d.]+)(ms|s|m)", s)
    if not m:
        sys.exit(f"bad -benchtime {s!r}")
    return float(m.group(1)) * {"ms": 1e-3, "s": 1, "m": 60}[m.group(2)], 0


def timeit(fn, bt):
    """Seconds per call of fn under -benchtime bt (seconds, iterations),
    after two warm-up calls."""
    return timing.timeit(fn, *bt, warmup=2)[0]


def worker():
    """Time PyTorch and NumPy; print 'name<TAB>ms' lines."""
    import numpy as np
    import torch

    torch.set_num_threads(threads)
    libs = sorted({l.split()[-1] for l in open("/proc/self/maps") if "blas" in l.rsplit("/", 1)[-1]})
    print(f"blas\t{', '.join(libs) or 'unknown'}\t0", flush=True)
    bt = seconds(benchtime)
    lr = 1e-4
    for dt, tdt, tag in ((np.float32, torch.float32, "f32"), (np.float64, torch.float64, "f64")):
        for s in SIZES:
            bs, i, h, o = s
            rng = np.random.default_rng(1)
            x = rng.uniform(-1, 1, (bs, i)).astype(dt)
            t = rng.uniform(-1, 1, (bs, o)).astype(dt)
            w1 = (rng.uniform(-1, 1, (i, h)) / i).astype(dt)
            b1 = (rng.uniform(-1, 1, h) * 0.1).astype(dt)
            w2 = (rng.uniform(-1, 1, (h, o)) / h).astype(dt)
            b2 = (rng.uniform(-1, 1, o) * 0.1).astype(dt)

            # NumPy by hand.
            def np_fwdbwd():
                z = x @ w1
                z += b1
                a = np.maximum(z, 0)
                y = a @ w2
                y += b2
                d = y - t
                _loss = np.vdot(d, d)
                d *= 2  # dL/dy
                gw2 = a.T @ d
                gb2 = d.sum(0)
                da = d @ w2.T
                da *= z > 0
                gw1 = x.T @ da
                gb1 = da.sum(0)
                return gw1, gb1, gw2, gb2

            def np_step():
                gw1, gb1, gw2, gb2 = np_fwdbwd()
                for p, g in ((w1, gw1), (b1, gb1), (w2, gw2), (b2, gb2)):
                    g *= lr
                    p -= g

            # PyTorch.
            net = torch.nn.Sequential(torch.nn.Linear(i, h), torch.nn.ReLU(), torch.nn.Linear(h, o)).to(tdt)
            xt, tt = torch.from_numpy(x), torch.from_numpy(t)
            opt = torch.optim.SGD(net.parameters(), lr=lr)

            def torch_fwdbwd():
                net.zero_grad(set_to_none=True)
                loss = ((net(xt) - tt) ** 2).sum()
                loss.backward()

            def torch_step():
                torch_fwdbwd()
                opt.step()

            for mode, npf, tf in (("fwdbwd", np_fwdbwd, torch_fwdbwd), ("sgd", np_step, torch_step)):
                name = f"{tag}/{size_name(s)}/{mode}"
                print(f"numpy\t{name}\t{timeit(npf, bt) * 1e3:.4f}", flush=True)
                print(f"torch\t{name}\t{timeit(tf, bt) * 1e3:.4f}", flush=True)


def run_go():
    pattern = "MLPBackprop/(f32|f64)/(" + "|".join(size_name(s) for s in SIZES) + ")/"
    go = subprocess.run(["go", "test", "-run", "^$", "-bench", pattern, "-benchtime", benchtime, "./engine"],
                        cwd=root, env=dict(os.environ, GOMAXPROCS=str(threads)), capture_output=True, text=True)
    if go.returncode != 0:
        sys.exit(go.stdout + go.stderr)
    out = {}
    for l in go.stdout.splitlines():
        m = re.match(r"^BenchmarkMLPBackprop/(\S+?)(?:-\d+)?\s+\d+\s+([\d.]+) ns/op", l)
        if m:
            out[m.group(1)] = float(m.group(2)) / 1e6
    return out


def run_python():
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")}
    if os.path.isdir(OPENBLAS):
        env["LD_LIBRARY_PATH"] = OPENBLAS + os.pathsep + env.get("LD_LIBRARY_PATH", "")
    py = subprocess.run([sys.executable, os.path.abspath(__file__), "-worker", "-benchtime", benchtime,
                         "-threads", str(threads)] + (["-small"] if small else []) +
                        (["-sizes", args[args.index("-sizes") + 1]] if "-sizes" in args else []),
                        env=env, capture_output=True, text=True)
    if py.returncode != 0:
        sys.exit(py.stdout + py.stderr)
    out, blas = {}, ""
    for l in py.stdout.splitlines():
        who, name, ms = l.split("\t")
        if who == "blas":
            blas = name
            continue
        out[(who, name)] = float(ms)
    return out, blas


def best(acc, new):
    for k, v in new.items():
        acc[k] = min(acc.get(k, v), v)


def main():
    vrun, other, blas = {}, {}, ""
    for _ in range(rounds):
        best(vrun, run_go())
        o, blas = run_python()
        best(other, o)
    print(f"Python side BLAS: {blas}")
    print(f"threads {threads}, benchtime {benchtime}, rounds {rounds}, load average {os.getloadavg()[0]:.2f} (at the end)")
    print(f"{'case':34} {'vrun ms':>10} {'torch ms':>10} {'numpy ms':>10} {'vrun/torch':>10} {'vrun/numpy':>10}")
    for name, v in vrun.items():
        t, n = other.get(("torch", name)), other.get(("numpy", name))
        print(f"{name:34} {v:10.3f} {t:10.3f} {n:10.3f} {v / t:10.2f} {v / n:10.2f}")


if __name__ == "__main__":
    if "-worker" in args:
        worker()
    else:
        main()
