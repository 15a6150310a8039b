#!/usr/bin/env python3
"""Where PyTorch spends a model's GPU time: its CUDA kernels, summed by name.

    python3 bench/torch_profile.py MODEL BATCH [RUNS]

MODEL is one of the torch twins of testdata/models/export.py (its
models(): resnet18, resnet50, mobilenet_v2, squeezenet1_1, bert, ...). The model runs in eval mode
under no_grad, f32 with TF32 off, as bench/torch_baseline.py times it; after
a warm-up, RUNS (default 20) forward passes run under torch.profiler, and
each kernel's total GPU time is printed per pass, largest first, beside the
sum. Read it next to `vrun -bench N -resident -profile` on the same machine.
"""
import os
import sys

import torch
from torch.profiler import ProfilerActivity, profile

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False


def make(name, batch):
    """The torch twin of name (export.models()) and a random input of batch
    rows shaped like its example input."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "testdata", "models"))
    import export
    twins = export.models()
    if name not in twins:
        sys.exit(f"no torch twin named {name!r} in testdata/models/export.py; have {sorted(twins)}")
    ctor, example = twins[name]
    shape = (batch, *example.shape[1:])
    if example.dtype.is_floating_point:
        x = torch.randn(*shape, device="cuda")
    else:
        x = torch.randint(0, 500, shape, device="cuda")
    return ctor(), x


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    name, batch = sys.argv[1], int(sys.argv[2])
    runs = int(sys.argv[3]) if len(sys.argv) > 3 else 20
    m, x = make(name, batch)
    m = m.eval().cuda()
    with torch.no_grad():
        for _ in range(10):
            m(x)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(runs):
                m(x)
            torch.cuda.synchronize()
    rows = []
    for e in prof.key_averages():
        t = getattr(e, "self_device_time_total", None)
        if t is None:
            t = e.self_cuda_time_total
        if t > 0:
            rows.append((t / runs, e.count // runs, e.key))
    rows.sort(reverse=True)
    total = sum(r[0] for r in rows)
    print(f"{name} batch {batch}: {total / 1e3:.3f} ms of kernels a pass ({runs} passes)")
    for t, n, k in rows:
        print(f"{t / 1e3:9.3f} ms {100 * t / total:5.1f} % x{n:<4d} {k[:110]}")


if __name__ == "__main__":
    main()
