#!/usr/bin/env python3
"""PyTorch baselines on the GPU machine, to print beside vrun's numbers.

    python3 bench/torch_baseline.py gemm      # cuBLAS GEMM TFLOP/s, f64/f32/f16, n = 1024/4096/8192 (TF32 off)
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


def models():
    import torchvision
    for name, make in (("resnet18", torchvision.models.resnet18), ("mobilenet_v2", torchvision.models.mobilenet_v2),
                       ("squeezenet1_1", torchvision.models.squeezenet1_1)):
        m = make(weights=None).eval().cuda()
        for batch in (1, 32):
            x = torch.randn(batch, 3, 224, 224, device="cuda")
            with torch.no_grad():
                for _ in range(10):
                    m(x)
                torch.cuda.synchronize()
                ts = []
                for _ in range(50):
                    t0 = time.perf_counter()
                    m(x)
                    torch.cuda.synchronize()
                    ts.append(time.perf_counter() - t0)
                ts.sort()
                print(f"torch eager {name:14} batch {batch:2}: median {ts[len(ts) // 2] * 1e3:.3f} ms", flush=True)


if __name__ == "__main__":
    {"gemm": gemm, "models": models}[sys.argv[1]]()
