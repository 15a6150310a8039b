#!/usr/bin/env python3
"""PyTorch baselines on the GPU machine, to print beside vrun's numbers.

    python3 bench/torch_baseline.py gemm      # cuBLAS GEMM TFLOP/s, f64/f32/f16, n = 1024/4096/8192 (TF32 off)
    python3 bench/torch_baseline.py bandwidth # GEMV and bandwidth-bound kernels in GB/s, beside the device copy
    python3 bench/torch_baseline.py models DIR  # eager and CUDA-graph batch-1/32 latency of DIR/*.onnx's torch twins

Timings use CUDA events around many iterations after a warm-up.
"""
import sys
import time

import torch

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False


def gemm():
    for dt in (torch.float64, torch.float32, torch.float16):
        for n in (1024, 4096, 8192):
            a = torch.randn(n, n, device="cuda", dtype=dt)
            b = torch.randn(n, n, device="cuda", dtype=dt)
            for _ in range(3):
                a @ b
            torch.cuda.synchronize()
            iters = max(3, int(2e12 / (2 * n**3)))
            iters = min(iters, 200)
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            for _ in range(iters):
                a @ b
            e.record()
            torch.cuda.synchronize()
            sec = s.elapsed_time(e) / 1e3 / iters
            print(f"torch GEMM {str(dt).split('.')[-1]:8} n={n:5}  {2 * n**3 / sec / 1e12:8.2f} TFLOP/s", flush=True)


def _gpu_seconds(fn, iters=50):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(iters):
        fn()
    e.record()
    torch.cuda.synchronize()
    return s.elapsed_time(e) / 1e3 / iters


def bandwidth():
    """GB/s of bytes read plus written, f32, the shapes of vrun's Vulkan benchmarks."""
    k, n = 4096, 14336
    x = torch.randn(1, k, device="cuda")
    w = torch.randn(k, n, device="cuda")
    wt = w.t().contiguous()  # n x k
    for name, fn in (("gemv x·W (W k×n)", lambda: x @ w), ("gemv W·x (W n×k)", lambda: wt @ x.t())):
        print(f"torch {name:24} {k * n * 4 / _gpu_seconds(fn) / 1e9:9.1f} GB/s", flush=True)
    rows, cols = 8192, 8192
    a = torch.randn(rows, cols, device="cuda")
    b = torch.randn(rows, cols, device="cuda")
    out = torch.empty_like(a)
    nb = rows * cols * 4
    img = torch.randn(32, 64, 112, 112, device="cuda")
    for name, fn, moved in (
        ("copy", lambda: out.copy_(a), 2 * nb),
        ("add", lambda: torch.add(a, b, out=out), 3 * nb),
        ("relu", lambda: torch.relu(a), 2 * nb),
        ("softmax rows", lambda: torch.softmax(a, dim=1), 2 * nb),
        ("layernorm rows", lambda: torch.nn.functional.layer_norm(a, (cols,)), 2 * nb),
        ("sum rows", lambda: a.sum(dim=1), nb),
        ("maxpool 3x3/2", lambda: torch.nn.functional.max_pool2d(img, 3, 2, 1), img.numel() * 4 * 5 // 4),
    ):
        print(f"torch {name:24} {moved / _gpu_seconds(fn) / 1e9:9.1f} GB/s", flush=True)


def models():
    """Batch-1 and batch-32 latency of the CNNs, batch 1 and 8 of the BERT-like
    encoder (testdata/models/export.py), eager and CUDA-graph replay (median of
    50 runs; f32, TF32 off)."""
    import os
    import torchvision
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "testdata", "models"))
    from export import BertEncoder
    for name, make, shape, batches in (
            ("resnet18", lambda: torchvision.models.resnet18(weights=None), (3, 224, 224), (1, 32)),
            ("resnet50", lambda: torchvision.models.resnet50(weights=None), (3, 224, 224), (1, 32)),
            ("mobilenet_v2", lambda: torchvision.models.mobilenet_v2(weights=None), (3, 224, 224), (1, 32)),
            ("squeezenet1_1", lambda: torchvision.models.squeezenet1_1(weights=None), (3, 224, 224), (1, 32)),
            ("bert", BertEncoder, (128, 768), (1, 8))):
        m = make().eval().cuda()
        for batch in batches:
            x = torch.randn(batch, *shape, device="cuda")
            with torch.no_grad():
                for _ in range(10):
                    m(x)
                torch.cuda.synchronize()
                g = torch.cuda.CUDAGraph()
                s = torch.cuda.Stream()
                s.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(s):
                    for _ in range(3):
                        m(x)
                torch.cuda.current_stream().wait_stream(s)
                with torch.cuda.graph(g):
                    m(x)
                for mode, fn in (("eager", lambda: m(x)), ("graph", g.replay)):
                    ts = []
                    for _ in range(50):
                        t0 = time.perf_counter()
                        fn()
                        torch.cuda.synchronize()
                        ts.append(time.perf_counter() - t0)
                    ts.sort()
                    print(f"torch {mode} {name:14} batch {batch:2}: median {ts[len(ts) // 2] * 1e3:.3f} ms", flush=True)


if __name__ == "__main__":
    {"gemm": gemm, "bandwidth": bandwidth, "models": models}[sys.argv[1]]()
