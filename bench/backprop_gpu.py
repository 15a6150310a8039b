#!/usr/bin/env python3
"""MLP backprop benchmark on a GPU machine (issue 9, item 7): vrun on each
GPU backend and PyTorch CUDA side by side in one run.

The machine has no Go toolchain: build the benchmark binary elsewhere,

    go test -c -o .gpu/engine.test ./engine

and run, from the repository root on the GPU machine,

    python3 bench/backprop_gpu.py .gpu/engine.test [vulkan:0 cuda:0 opencl:1]

The network is Linear-ReLU-Linear with the sum-of-squares loss, as in
bench/backprop.py. "fwdbwd" times forward + backward, "sgd" one full
training step (forward + backward + SGD update). PyTorch runs eager
(torch.nn.Linear, autograd, torch.optim.SGD with foreach), synchronised
after each iteration like vrun's Step, which waits for its one submit.
The ratio is vrun's time over PyTorch's (below 1: vrun is faster).
"""
import re
import subprocess
import sys
import time

import torch

SIZES = [(64, 784, 256, 10), (256, 1024, 1024, 10), (1024, 4096, 4096, 1024)]


def torch_time(dt, size, mode, secs=1.0):
    bs, nin, hid, nout = size
    torch.manual_seed(0)
    dev = torch.device("cuda")
    l1 = torch.nn.Linear(nin, hid).to(dev, dt)
    l2 = torch.nn.Linear(hid, nout).to(dev, dt)
    x = torch.randn(bs, nin, device=dev, dtype=dt)
    t = torch.randn(bs, nout, device=dev, dtype=dt)
    opt = torch.optim.SGD(list(l1.parameters()) + list(l2.parameters()), lr=1e-4)

    def step():
        for p in list(l1.parameters()) + list(l2.parameters()):
            p.grad = None
        loss = ((l2(torch.relu(l1(x))) - t) ** 2).sum()
        loss.backward()
        if mode == "sgd":
            opt.step()
        torch.cuda.synchronize()

    for _ in range(10):
        step()
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < secs:
        step()
        n += 1
    return (time.perf_counter() - t0) / n * 1e3


def vrun_times(binary, device):
    out = subprocess.run([binary, "-test.run", "^$", "-test.bench", "MLPBackprop", "-test.benchtime", "1s"],
                         env={"VRUN_BENCH_DEVICE": device, "PATH": "/usr/bin:/bin",
                              "LD_LIBRARY_PATH": __import__("os").environ.get("LD_LIBRARY_PATH", ""),
                              "VK_DRIVER_FILES": __import__("os").environ.get("VK_DRIVER_FILES", "")},
                         capture_output=True, text=True)
    res = {}
    for line in out.stdout.splitlines():
        m = re.match(r"BenchmarkMLPBackprop/(f\d+)/b(\d+)_(\d+)-(\d+)-(\d+)/(\w+)-\d+\s+\d+\s+([\d.]+) ns/op", line)
        if m:
            key = (m.group(1), tuple(int(m.group(i)) for i in range(2, 6)), m.group(6))
            res[key] = float(m.group(7)) / 1e6
    if not res:
        print(f"# {device}: no results\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}")
    return res


def main():
    binary = sys.argv[1]
    devices = sys.argv[2:] or ["vulkan:0", "cuda:0"]
    print(f"# torch {torch.__version__}, {torch.cuda.get_device_name()}")
    vr = {d: vrun_times(binary, d) for d in devices}
    print("| dtype | size | mode | PyTorch CUDA ms | " + " | ".join(f"vrun {d} ms (ratio)" for d in devices) + " |")
    print("|---|---|---|---|" + "---|" * len(devices))
    for dts, dt in (("f32", torch.float32), ("f64", torch.float64)):
        for size in SIZES:
            for mode in ("fwdbwd", "sgd"):
                pt = torch_time(dt, size, mode)
                cells = []
                for d in devices:
                    v = vr[d].get((dts, size, mode))
                    cells.append("-" if v is None else f"{v:.3f} ({v / pt:.2f})")
                print(f"| {dts} | b{size[0]} {size[1]}-{size[2]}-{size[3]} | {mode} | {pt:.3f} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
