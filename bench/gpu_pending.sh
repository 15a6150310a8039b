#!/bin/bash
# bench/gpu_pending.sh: one device-machine call that checks and times the
# GPU changes still switched off (issue 15): the Vulkan split-K fixup
# (VRUN_VK_FIXUP=0/1) and cuDNN's fused call with the residual and any
# activation (VRUN_CUDA_CUDNN_FUSE=1/all).
#
#   source .gpu/setup.sh && bench/gpu_pending.sh .gpu
#
# .gpu (ignored, carried) holds vk.test.xz (go test -c ./rt/vulkan),
# cu.test.xz (go test -c ./cudashim) and vrun.xz (go build ./cmd/vrun),
# built with CGO_ENABLED=1 -trimpath -ldflags "-s -w" and xz -9e, beside
# ../shared/gpu/'s setup.sh and packages. The working tree that travels is
# limited to 64 MiB (as a tar: about 58 MiB of it is tracked files), so
# move testdata/onnx, testdata/grad and testdata/optimstep out of the
# checkout for the call and back after it.
#
# In order, each step's results written to $OUT as it finishes, so a call
# cut short keeps what it measured:
#   1. the split-K tests on Vulkan and TestConvRes on CUDA;
#   2. the four CNNs exported by testdata/models/export.py, each run with
#      both settings of both knobs and compared with PyTorch's output;
#   3. vrun -bench 300 -resident with each setting (two rounds around
#      PyTorch's CUDA-graph replay of the same models).
set -u
dir=${1:-.gpu}
R=$PWD
T0=$(date +%s)
el() { echo "[$(($(date +%s) - T0))s] $*" >>"$OUT/log.txt"; }
models="squeezenet1_1 mobilenet_v2 resnet18 resnet50"
mkdir -p /tmp/b /tmp/m /tmp/o
for f in vk.test cu.test vrun; do xz -dc "$dir/$f.xz" >/tmp/b/$f & done
wait
chmod +x /tmp/b/*
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >"$OUT/gpu.txt" 2>&1
(python3 testdata/models/export.py /tmp/m $models >"$OUT/export.log" 2>&1; echo "export rc=$?" >>"$OUT/export.log") &
exp=$!
cd "$R/rt/vulkan" && timeout 60 /tmp/b/vk.test -test.run 'TestSplitKFixup|TestSplitKConv' -test.v >"$OUT/vk.log" 2>&1
echo "vk rc=$?" >>"$OUT/vk.log"
cd "$R/cudashim" && timeout 45 /tmp/b/cu.test -test.run 'TestConvRes' -test.v >"$OUT/cu.log" 2>&1
echo "cu rc=$?" >>"$OUT/cu.log"
cd "$R"
wait $exp
el "tests and export done"
for m in $models; do
	for k in 0 1; do VRUN_VK_FIXUP=$k timeout 40 /tmp/b/vrun -device vulkan -i x=/tmp/m/$m.x.npy -o /tmp/o/vk$k/$m /tmp/m/$m.onnx >/dev/null 2>>"$OUT/out_err.txt"; done
	for k in 1 all; do VRUN_CUDA_CUDNN_FUSE=$k timeout 40 /tmp/b/vrun -device cuda:0 -i x=/tmp/m/$m.x.npy -o /tmp/o/cu$k/$m /tmp/m/$m.onnx >/dev/null 2>>"$OUT/out_err.txt"; done
done
python3 - $models >"$OUT/outcmp.txt" 2>&1 <<'PY'
import glob, sys
import numpy as np
for m in sys.argv[1:]:
    ref = np.load(f"/tmp/m/{m}.torch.npy")
    for d in ("vk0", "vk1", "cu1", "cuall"):
        fs = glob.glob(f"/tmp/o/{d}/{m}/*.npy")
        if not fs:
            print(m, d, "no output")
            continue
        y = np.load(fs[0]).reshape(ref.shape)
        print(m, d, "max|d| vs torch %.2e, max|torch| %.2e" % (np.abs(y - ref).max(), np.abs(ref).max()))
PY
el "outputs compared"
b() { timeout 40 /tmp/b/vrun "$@" 2>&1 | grep -E "^bench" | sed -E 's/.*min ([0-9.]+) ms +median ([0-9.]+) ms.*/min \1 median \2/'; }
ab() {
	for m in $models; do
		for k in 0 1; do echo "vulkan VRUN_VK_FIXUP=$k $m round $1: $(VRUN_VK_FIXUP=$k b -device vulkan -bench 300 -resident /tmp/m/$m.onnx)"; done
		for k in 1 all; do echo "cuda VRUN_CUDA_CUDNN_FUSE=$k $m round $1: $(VRUN_CUDA_CUDNN_FUSE=$k b -device cuda:0 -bench 300 -resident /tmp/m/$m.onnx)"; done
	done >>"$OUT/ab.txt" 2>&1
	el "round $1 done"
}
ab 1
python3 - $models >"$OUT/graph.txt" 2>&1 <<'PY'
import sys, time
import torch, torchvision
sys.path.insert(0, "bench")
from torch_baseline import cuda_graph  # also turns TF32 off
for name in sys.argv[1:]:
    m = getattr(torchvision.models, name)(weights=None).eval().cuda()
    x = torch.randn(1, 3, 224, 224, device="cuda")
    with torch.no_grad():
        for _ in range(10):
            m(x)
        g = cuda_graph(lambda: m(x))
        ts = []
        for _ in range(300):
            t0 = time.perf_counter()
            g.replay()
            torch.cuda.synchronize()
            ts.append(time.perf_counter() - t0)
        ts.sort()
        print(f"pytorch graph {name}: min {ts[0] * 1e3:.3f} median {ts[len(ts) // 2] * 1e3:.3f} ms", flush=True)
PY
el "pytorch done"
ab 2
el end
