#!/bin/bash
# bench/gpu_pending.sh: the GPU measurements that the thirteenth session's
# change (convcm.comp, f16-weight convolutions on cooperative matrices,
# and the coopConvWins rule that keeps the shallower convolutions in f32
# on such devices) still owes (issue 15): its device time ran out on
# requests that found no machine. The fourteenth session had no device at
# all; its KHR cooperative-matrix variants are checked in step 1 and
# timed in step 6. Build the kit on this machine, then run it in one
# device-machine call:
#
#   bench/gpu_pending.sh kit .gpu      # here: binaries into .gpu/kit.tar.xz
#   source .gpu/setup.sh && bench/gpu_pending.sh run .gpu   # on the device machine
#
# .gpu (ignored, carried) also holds ../shared/gpu/'s setup.sh and
# packages. Each step writes its results to $OUT as it finishes, so a call
# cut short keeps what it measured (about 4 minutes on an H100):
#   1. the tests of convcm.comp, mmcm.comp and the f16-weight lowering,
#      with the GPU's name (an H200 has no figures for it yet); on a GPU
#      with VK_NV_cooperative_matrix2 they run the KHR 16x16x16 variants
#      too (fourteenth session: never run on a GPU), and BenchmarkGEMMCoop
#      times them against NV's at n = 4096 (step 6);
#   2. batch 1: f32 against f16 with the rule (the default) and with
#      every f16-weight Conv on the f32w16 kernels (VRUN_VK_CONVCM=0), two
#      rounds, on the four CNNs, and the f16 runs' precision notes;
#   3. batch 32: the same on resnet50, resnet18 and mobilenet_v2 (never
#      timed with convcm.comp);
#   4. per-node GPU times (-profile -json) of f32 and f16 on resnet50,
#      squeezenet1_1 and mobilenet_v2, as node / f32 ms / f16 ms lines;
#   5. OpenCL cold start of resnet18 on NVIDIA's platform
#      (bench/coldstart/opencl.sh, fresh caches) with the vrun before the
#      GEMV's mode was fixed at build time (GV_MODE, commit 7ba93e9c) and
#      with this one, in turn, twice;
#   6. the f16 GEMM at n = 4096 on mmcm.comp's NV and KHR variants
#      (BenchmarkGEMMCoop, every block).
set -u
mode=${1:?usage: $0 kit|run DIR}
dir=${2:-.gpu}
case $mode in
kit)
	k=$(mktemp -d)/kit
	mkdir -p "$k"
	c=$(git rev-parse --short=8 HEAD)
	go build -trimpath -ldflags "-s -w -X main.commit=$c" -o "$k/vrun" ./cmd/vrun &&
		go test -c -trimpath -ldflags "-s -w" -o "$k/vulkan.test" ./rt/vulkan || exit 1
	old=$(mktemp -d)
	git worktree add -q --detach "$old" 7ba93e9c &&
		(cd "$old" && go build -trimpath -ldflags "-s -w" -o "$k/vrun_old" ./cmd/vrun) || exit 1
	git worktree remove --force "$old"
	tar cf - -C "$(dirname "$k")" kit | xz -9e -T0 >"$dir/kit.tar.xz"
	ls -l "$dir/kit.tar.xz"
	exit 0
	;;
run) ;;
*)
	echo "usage: $0 kit|run DIR" >&2
	exit 2
	;;
esac
R=$PWD W=$OUT
tar xJf "$dir/kit.tar.xz" -C /tmp || exit 1
K=/tmp/kit
export VRUN_VK_VALIDATION=0
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >"$W/gpu.txt" 2>&1
(python3 testdata/models/export.py /tmp/m resnet18 resnet50 mobilenet_v2 squeezenet1_1 >"$W/export.log" 2>&1) &
exp=$!
cd "$R/rt/vulkan" && timeout 150 $K/vulkan.test -test.run 'TestConvCoop|TestMatMulCoop|TestCoopConvRule|TestHalfWeights|TestConformance' -test.v 2>&1 |
	grep -E "^(---|ok|FAIL|PASS)|_test.go|panic|passed" >"$W/tests.log"
cd "$R" && wait $exp
# bench ENV PRECISION MODEL RUNS BATCH: the median of vrun -bench
bench() {
	env $1 $K/vrun -device vulkan:0 -bench "$4" -resident -precision "$2" -shape "x=$5x3x224x224" "/tmp/m/$3.onnx" 2>&1 |
		grep '^bench' | sed 's/.*median //;s/ p90.*//'
}
for m in squeezenet1_1 mobilenet_v2 resnet18 resnet50; do
	for r in 1 2; do
		echo "$m b1 f32 $(bench "" f32 $m 300 1) | f16 $(bench "" f16 $m 300 1) | f32w16 $(bench VRUN_VK_CONVCM=0 f16 $m 300 1)" >>"$W/f16.log"
	done
	$K/vrun -device vulkan:0 -precision f16 -v -shape x=1x3x224x224 "/tmp/m/$m.onnx" 2>&1 | grep -iE '^weights|kept|note' >>"$W/notes.log"
done
for m in resnet50 resnet18 mobilenet_v2; do
	for r in 1 2; do
		echo "$m b32 f32 $(bench "" f32 $m 30 32) | f16 $(bench "" f16 $m 30 32) | f32w16 $(bench VRUN_VK_CONVCM=0 f16 $m 30 32)" >>"$W/f16.log"
	done
done
for m in resnet50 squeezenet1_1 mobilenet_v2; do
	for p in f32 f16; do
		$K/vrun -device vulkan:0 -precision $p -profile -json -shape x=1x3x224x224 "/tmp/m/$m.onnx" >"/tmp/p_$p.json" 2>/dev/null
	done
	python3 - "$m" >>"$W/prof.log" 2>&1 <<'PY'
import json, sys
P = {}
for k in ("f32", "f16"):
    P[k] = {p["node"]: p["ms"] for p in json.load(open(f"/tmp/p_{k}.json"))["profile"]}
print("##", sys.argv[1], "total ms", {k: round(sum(v.values()), 3) for k, v in P.items()})
for n, t in P["f32"].items():
    print(sys.argv[1], n, t, P["f16"].get(n))
PY
done
tar czf "$W/all.tgz" -C "$W" --exclude all.tgz . 2>/dev/null
for v in old new old new; do
	b=$K/vrun
	[ $v = old ] && b=$K/vrun_old
	KEEP=$W/cold_$v bash bench/coldstart/opencl.sh "$b" /tmp/m/resnet18.onnx opencl:1 "$v=" >>"$W/cold.log" 2>&1
done
tar czf "$W/all.tgz" -C "$W" --exclude all.tgz . 2>/dev/null
cd "$R/rt/vulkan" && timeout 120 $K/vulkan.test -test.run '^$' -test.bench 'GEMMCoop$/^4096/' -test.benchtime 20x 2>&1 |
	grep -E "^Benchmark|FAIL|panic" >"$W/coop_khr.log"
cd "$R" && tar czf "$W/all.tgz" -C "$W" --exclude all.tgz . 2>/dev/null
