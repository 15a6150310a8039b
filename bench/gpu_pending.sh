#!/bin/bash
# bench/gpu_pending.sh: the GPU measurements of the eleventh session's
# changes (issue 15), which no device machine could be started to run
# (2026-12-07: seven requests refused). Build the kit on this machine,
# then run it in one device-machine call:
#
#   bench/gpu_pending.sh kit .gpu      # here: binaries and SPIR-V into .gpu/kit.tar.xz
#   source .gpu/setup.sh && bench/gpu_pending.sh run .gpu   # on the device machine
#
# .gpu (ignored, carried) also holds ../shared/gpu/'s setup.sh and
# packages. Each step writes its results to $OUT as it finishes, so a call
# cut short keeps what it measured (about 4 minutes in all on an H100):
#   1. TestPool, then max pool 3×3/2 (BenchmarkBandwidth/maxpool: poolvs,
#      the default; -nosg, the same without subgroup shuffles; -pv0,
#      pool3), and again with the poolv SPIR-V of 9d7bcfb0 (before this
#      session) in place of the new one, so its -nosg rows are the old
#      kernel: each against the copy kernel of the same process (x-copy,
#      issue 15's ≥ 0.9);
#   2. the f32 GEMMs and BERT (batch 1 and 8) on Vulkan with the load path
#      chosen at run time (VRUN_VK_FIXED=0, the default) and fixed in each
#      pipeline (1), cuBLAS and PyTorch's CUDA graph beside the first;
#   3. -precision f16 against f32 at batch 1 on the four CNNs (vrun -bench
#      300 -resident, f32 / f16 / f32), and resnet50's per-op profile in each;
#   4. the f16-weight GEMV with f16vec4 loads (gemv.comp's ld_b4 as
#      vec4(f16vec4), through VRUN_VK_SPV) against the embedded
#      unpackHalf2x16 one (BenchmarkGEMV/f32w16);
#   5. OpenCL on NVIDIA's platform: TestGEMV (row mode's vector loads), and
#      BenchmarkGEMV's row (xWT) and column (xW) modes;
#   6. OpenCL cold start of resnet18 with its per-program build log
#      (bench/coldstart/opencl.sh, fresh caches).
set -u
mode=${1:?usage: $0 kit|run DIR}
dir=${2:-.gpu}
case $mode in
kit)
	k=$(mktemp -d)/kit
	mkdir -p "$k/oldspv" "$k/gemvh"
	c=$(git rev-parse --short=8 HEAD)
	go build -trimpath -ldflags "-s -w -X main.commit=$c" -o "$k/vrun" ./cmd/vrun &&
		go build -trimpath -ldflags "-s -w -X main.commit=$c" -o "$k/suite" ./bench/suite &&
		go test -c -trimpath -ldflags "-s -w" -o "$k/vulkan.test" ./rt/vulkan &&
		go test -c -trimpath -ldflags "-s -w" -o "$k/clshim.test" ./clshim || exit 1
	git show 9d7bcfb0:shaders/spv/poolv_f32.spv >"$k/oldspv/poolv_f32.spv" || exit 1
	# gemv.comp with f16 weights loaded as f16vec4 (its f32w16 build)
	t=$(mktemp -d)
	cp shaders/*.glsl "$t/"
	sed 's/^vec4 ld_b4(uint i) { return h4(b4\[i\]); }$/layout(std430, binding = 1) readonly buffer BB4h { f16vec4 b4h[]; };\nvec4 ld_b4(uint i) { return vec4(b4h[i]); }/' \
		shaders/gemv.comp >"$t/gemv.comp"
	(cd "$t" && glslc -fshader-stage=compute --target-env=vulkan1.2 -O -I . -DX_DT=1 -DY_DT=1 -DW_DT=2 \
		-DNEED_16BIT=1 -DSUBGROUP=1 gemv.comp -o "$k/gemvh/gemvsg_f32w16.spv") || exit 1
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
export VRUN_VK_VALIDATION=0 VRUN_MODELS_DIR=/tmp/m
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >"$W/gpu.txt" 2>&1
(python3 testdata/models/export.py /tmp/m resnet18 resnet50 mobilenet_v2 squeezenet1_1 bert >"$W/export.log" 2>&1) &
exp=$!
cd "$R/rt/vulkan" && $K/vulkan.test -test.run 'TestPool$' -test.v 2>&1 | tail -3 >"$W/pooltest.log"
$K/vulkan.test -test.run XXX -test.bench 'Bandwidth/maxpool' -test.benchtime 100x >"$W/pool_new.log" 2>&1
VRUN_VK_SPV=$K/oldspv $K/vulkan.test -test.run XXX -test.bench 'Bandwidth/maxpool' -test.benchtime 100x >"$W/pool_old.log" 2>&1
cd "$R" && wait $exp
for f in 0 1; do
	b=none
	[ $f = 0 ] && b=pytorch
	VRUN_VK_FIXED=$f $K/suite run -backends vulkan:0 -baselines $b -kinds gemm,model -models /tmp/m/bert.onnx \
		-batches 8 -model-time 600ms -out "$W/fixed$f.json" >"$W/fixed$f.log" 2>&1
done
for m in squeezenet1_1 mobilenet_v2 resnet18 resnet50; do
	for p in f32 f16 f32; do
		echo "$m $p $($K/vrun -device vulkan:0 -bench 300 -resident -precision $p -shape x=1x3x224x224 /tmp/m/$m.onnx 2>&1 | grep '^bench')" >>"$W/f16.log"
	done
done
for p in f32 f16; do
	$K/vrun -device vulkan:0 -bench 100 -resident -profile -precision $p -shape x=1x3x224x224 /tmp/m/resnet50.onnx >"$W/prof_$p.log" 2>&1
done
cd "$R/rt/vulkan"
$K/vulkan.test -test.run XXX -test.bench '^BenchmarkGEMV$' -test.benchtime 200x >"$W/gemv.log" 2>&1
VRUN_VK_SPV=$K/gemvh $K/vulkan.test -test.run XXX -test.bench '^BenchmarkGEMV$' -test.benchtime 200x >"$W/gemv_f16vec4.log" 2>&1
cd "$R/clshim"
$K/clshim.test -test.run 'TestGEMV$' -test.v 2>&1 | tail -5 >"$W/cltest.log"
$K/clshim.test -test.run XXX -test.bench 'GEMV/dev1' -test.benchtime 200x >"$W/clgemv.log" 2>&1
cd "$R"
KEEP=$W/cold bash bench/coldstart/opencl.sh $K/vrun /tmp/m/resnet18.onnx opencl:1 base= >"$W/cold.log" 2>&1
