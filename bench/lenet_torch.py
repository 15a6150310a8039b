"""The PyTorch side of the LeNet-5 benchmarks (lenet_mnist.py, lenet_gpu.py):
read_idx reads a gzipped MNIST IDX file, load_mnist the normalised images
and labels, and train_lenet trains PyTorch's LeNet-5 and times its epochs.
NumPy and PyTorch are imported on first use, so that the vrun side of a
benchmark runs without them."""

import gzip
import os
import resource
import time


def read_idx(path):
    import numpy as np
    with gzip.open(path, "rb") as f:
        b = f.read()
    ndim = b[3]
    dims = [int.from_bytes(b[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(b, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def load_mnist(d):
    """The MNIST files in folder d as CPU tensors x, y, tx, ty: training and
    test images scaled to [0, 1] and normalised (0.1307, 0.3081), shaped
    [N, 1, 28, 28], and their int64 labels."""
    import numpy as np
    import torch
    img = lambda name: torch.from_numpy((read_idx(os.path.join(d, name)).astype(np.float32) / 255 - 0.1307) / 0.3081).reshape(-1, 1, 28, 28)
    lab = lambda name: torch.from_numpy(read_idx(os.path.join(d, name)).astype(np.int64))
    return (img("train-images-idx3-ubyte.gz"), lab("train-labels-idx1-ubyte.gz"),
            img("t10k-images-idx3-ubyte.gz"), lab("t10k-labels-idx1-ubyte.gz"))


def train_lenet(x, y, tx, ty, dev, epochs):
    """Trains LeNet-5 (PyTorch's default initialisation, after the caller's
    manual_seed) on x, y on device dev: cross-entropy, Adam lr 1e-3, batch
    64, reshuffled each epoch. Returns the seconds of each epoch's steps,
    the CPU seconds (user + system) of steps 2..N of each epoch scaled to N
    steps, and the accuracy on tx, ty."""
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    x, y, tx, ty = x.to(dev), y.to(dev), tx.to(dev), ty.to(dev)
    net = nn.Sequential(
        nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
        nn.Linear(400, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, 10)).to(dev)
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    times = []
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    cpu = lambda: (lambda r: r.ru_utime + r.ru_stime)(resource.getrusage(resource.RUSAGE_SELF))
    cpus = []
    for e in range(epochs):
        perm = torch.randperm(len(x), device=dev)
        sync()
        t0 = time.perf_counter()
        n = 0
        for i in range(0, len(x), 64):
            idx = perm[i:i + 64]
            loss = F.cross_entropy(net(x[idx]), y[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            n += 1
            if n == 1:
                c0 = cpu()
        sync()
        times.append(time.perf_counter() - t0)
        cpus.append((cpu() - c0) * n / max(n - 1, 1))
    with torch.no_grad():
        acc = float((net(tx).argmax(1) == ty).float().mean())
    return times, cpus, acc
