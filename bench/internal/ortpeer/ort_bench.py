#!/usr/bin/env python3
"""Times ONNX models in onnxruntime (Python) for bench/ort and bench/suite,
where node or onnxruntime-node is missing (the GPU machine has Python's
onnxruntime). The protocol is ort_bench.js's, one JSON object per line
each way on stdin and stdout:

  {"cmd": "load", "model": PATH, "threads": N, "inputs": {NAME: {"dtype", "dims", "data": BASE64}}}
      -> {"id": K, "outputs": {NAME: {"dtype", "dims", "data"}}, "version": V}
  {"cmd": "bench", "id": K, "runs": N}
      -> {"ms": [t1, ..., tN]}          (each run's wall time, in ms)
  {"cmd": "profile", "model": PATH, "threads": N, "inputs": {...}, "runs": R, "prefix": P}
      -> {"file": F}   (onnxruntime's profile of 3 warm-up runs and R
                        timed ones, a JSON trace written to F = P_*.json)

Sessions: CPU execution provider, graph optimisations "all", the
sequential executor, N intra-op threads and one inter-op thread, as
ort_bench.js sets them. Errors come back as {"error": MESSAGE}.
"""
import base64
import json
import sys
import time

import numpy as np
import onnxruntime as ort

sessions = []


def tensor(t):
    dt = np.dtype("bool" if t["dtype"] == "bool" else t["dtype"])
    return np.frombuffer(base64.b64decode(t["data"]), dtype=dt).reshape(t["dims"]).copy()


def options(req):
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.intra_op_num_threads = req["threads"]
    so.inter_op_num_threads = 1
    return so


def load(req):
    s = ort.InferenceSession(req["model"], options(req), providers=["CPUExecutionProvider"])
    feeds = {name: tensor(t) for name, t in req["inputs"].items()}
    names = [o.name for o in s.get_outputs()]
    res = s.run(None, feeds)
    outputs = {}
    for name, y in zip(names, res):
        y = np.ascontiguousarray(y)
        outputs[name] = {"dtype": str(y.dtype), "dims": list(y.shape), "data": base64.b64encode(y.tobytes()).decode()}
    sessions.append((s, feeds))
    return {"id": len(sessions) - 1, "outputs": outputs, "version": ort.__version__ + " (python)"}


def bench(req):
    s, feeds = sessions[req["id"]]
    ms = []
    for _ in range(req["runs"]):
        t0 = time.perf_counter_ns()
        s.run(None, feeds)
        ms.append((time.perf_counter_ns() - t0) / 1e6)
    return {"ms": ms}


def profile(req):
    so = options(req)
    so.enable_profiling = True
    so.profile_file_prefix = req["prefix"]
    s = ort.InferenceSession(req["model"], so, providers=["CPUExecutionProvider"])
    feeds = {name: tensor(t) for name, t in req["inputs"].items()}
    for _ in range(req["runs"] + 3):
        s.run(None, feeds)
    return {"file": s.end_profiling()}


handlers = {"load": load, "bench": bench, "profile": profile}

for line in sys.stdin:
    if not line.strip():
        continue
    try:
        req = json.loads(line)
        out = handlers[req["cmd"]](req)
    except Exception as e:  # reported to the Go side, which names the model
        out = {"error": str(e)}
    sys.stdout.write(json.dumps(out) + "\n")
    sys.stdout.flush()
