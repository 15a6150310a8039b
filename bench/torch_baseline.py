#!/usr/bin/env python3
"""PyTorch baselines on the GPU machine, to print beside vrun's numbers.

    python3 bench/torch_baseline.py gemm      # cuBLAS GEMM TFLOP/s, f64/f32/f16, n = 1024/4096/8192 (TF32 off)
    python3 bench/torch_baseline.py bandwidth # GEMV and bandwidth-bound kernels in GB/s, beside the device copy
    python3 bench/torch_baseline.py models DIR  # eager and CUDA-graph batch-1/32 latency of DIR/*.onnx's torch twins
    python3 bench/torch_baseline.py suite SPEC.json  # bench/suite's cases (see suite()), JSON lines out

Timings use CUDA events around many iterations after a warm-up.
"""
import json
import os
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


def cuda_graph(fn):
    """Captures fn into a CUDA graph after three warm-up calls on a side
    stream (as PyTorch's docs do), and returns the graph to replay."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    return g


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
                g = cuda_graph(lambda: m(x))
                for mode, fn in (("eager", lambda: m(x)), ("graph", g.replay)):
                    ts = []
                    for _ in range(50):
                        t0 = time.perf_counter()
                        fn()
                        torch.cuda.synchronize()
                        ts.append(time.perf_counter() - t0)
                    ts.sort()
                    print(f"torch {mode} {name:14} batch {batch:2}: median {ts[len(ts) // 2] * 1e3:.3f} ms", flush=True)


def suite(path):
    """The cases bench/suite runs on vrun, timed the same way (timing.median_time),
    on the spec's device ("cpu" with its thread count, or "cuda"). The spec
    (written by bench/suite) holds the min_time/min_runs/max_runs bounds,
    "gemm": [n], "gemv": [{case, k, n, form}], "conv": [{case, n, c, h, k, kh,
    s, p, groups}] and "models": [{name, batch, shape, dtype}]. Prints one JSON
    object per line: first {"version", "device"} (or {"skipped": why}), then
    {"kind", "case", "batch", "impl", "ms", "runs"} or {..., "error"} per case.
    Models are export.py's torch twins of the ONNX files by name (random
    weights; eager, and CUDA-graph replay on CUDA as impl "pytorch-graph")."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import timing
    spec = json.load(open(path))
    dev = spec["device"]
    if dev == "cuda" and not torch.cuda.is_available():
        print(json.dumps({"skipped": f"torch {torch.__version__} sees no CUDA device"}), flush=True)
        return
    if dev == "cpu":
        torch.set_num_threads(spec["threads"])
        name = f"{spec['threads']} threads"
    else:
        name = torch.cuda.get_device_name(0)
    print(json.dumps({"version": torch.__version__, "device": name}), flush=True)
    sync = torch.cuda.synchronize if dev == "cuda" else None
    bounds = dict(min_time=spec["min_time"], min_runs=spec["min_runs"], max_runs=spec["max_runs"])

    def emit(kind, case, impl, fn, batch=0, reps=0):
        out = {"kind": kind, "case": case, "impl": impl, "batch": batch}
        try:
            with torch.no_grad():
                sec, runs = timing.median_time(fn, sync=sync, reps=reps, **bounds)
            out.update(ms=sec * 1e3, runs=runs)
        except Exception as e:  # recorded beside the case
            out["error"] = str(e).split("\n")[0]
        print(json.dumps(out), flush=True)

    g = torch.Generator(device=dev).manual_seed(1)

    def rnd(*shape):
        return torch.rand(*shape, generator=g, device=dev) - 0.5

    for c in (spec.get("gemm") or []):
        n = c["n"]
        a, b, y = rnd(n, n), rnd(n, n), torch.empty(n, n, device=dev)
        emit("gemm", c["case"], "pytorch", lambda: torch.matmul(a, b, out=y))
        del a, b, y
    for c in (spec.get("gemv") or []):
        k, n = c["k"], c["n"]
        x = rnd(1, k)
        if c["form"] == "xA":
            w, y = rnd(k, n), torch.empty(1, n, device=dev)
            emit("gemv", c["case"], "pytorch", lambda: torch.matmul(x, w, out=y))
        else:
            w, y = rnd(n, k), torch.empty(n, 1, device=dev)
            xt = x.t().contiguous()
            emit("gemv", c["case"], "pytorch", lambda: torch.matmul(w, xt, out=y))
        del w, x, y
    for c in (spec.get("conv") or []):
        x = rnd(c["n"], c["c"], c["h"], c["h"])
        w = rnd(c["k"], c["c"] // c["groups"], c["kh"], c["kh"])
        b = rnd(c["k"])
        emit("conv", c["case"], "pytorch",
             lambda: torch.nn.functional.conv2d(x, w, b, c["s"], c["p"], 1, c["groups"]))
    twins = {}
    if spec.get("models"):
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "testdata", "models"))
        import export
        twins = export.models()
    for mdl in (spec.get("models") or []):
        name, batch, shape = mdl["name"], mdl["batch"], mdl["shape"]
        if name not in twins:
            continue  # no torch twin in testdata/models/export.py: no baseline
        torch.manual_seed(1234)
        m = twins[name][0]().eval().to(dev)
        if mdl["dtype"].startswith("int"):
            x = torch.randint(0, 500, shape, device=dev)
        else:
            x = rnd(*shape)
        emit("model", name, "pytorch", lambda: m(x), batch=batch, reps=1)
        if dev == "cuda":
            try:
                with torch.no_grad():
                    gr = cuda_graph(lambda: m(x))
                emit("model", name, "pytorch-graph", gr.replay, batch=batch, reps=1)
            except Exception as e:
                print(json.dumps({"kind": "model", "case": name, "batch": batch, "impl": "pytorch-graph",
                                  "error": str(e).split("\n")[0]}), flush=True)
        del m
        if dev == "cuda":
            torch.cuda.empty_cache()


if __name__ == "__main__":
    if sys.argv[1] == "suite":
        suite(sys.argv[2])
    else:
        {"gemm": gemm, "bandwidth": bandwidth, "models": models}[sys.argv[1]]()
