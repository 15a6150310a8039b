#!/bin/sh
# bench/coldstart/run.sh: cold start of vrun (plan + first run), per device.
#
#   bench/coldstart/run.sh VRUN MODEL.onnx REPS DEVICE...
#   bench/coldstart/run.sh ./vrun resnet18.onnx 3 vulkan:0 opencl:0 cuda:0
#
# For each device and repeat it makes fresh cache directories (HOME,
# XDG_CACHE_HOME and VRUN_CACHE_DIR all point into one new temporary
# directory, so that vrun's pipeline and program caches and the drivers'
# own shader caches start empty), runs `VRUN -device D -v -json MODEL`
# twice in it (cold, then warm with the caches the first run left) and
# prints plan_ms, first_run_ms and their sum. NVIDIA's driver keeps its
# own caches under HOME (~/.nv/ComputeCache for CUDA and OpenCL JIT,
# ~/.cache/nvidia or ~/.nv/GLCache for Vulkan pipelines), so the fresh
# HOME empties them too; CUDA_CACHE_PATH or __GL_SHADER_DISK_CACHE_PATH
# set in the environment would override that, so unset them.
set -eu
if [ $# -lt 4 ]; then
	echo "usage: $0 VRUN MODEL.onnx REPS DEVICE..." >&2
	exit 2
fi
vrun=$1 model=$2 reps=$3
shift 3
printf '%-10s %-4s %-5s %10s %12s %10s\n' device rep cache plan_ms first_run_ms sum_ms
for dev in "$@"; do
	r=1
	while [ "$r" -le "$reps" ]; do
		c=$(mktemp -d)
		for k in cold warm; do
			out=$(HOME=$c XDG_CACHE_HOME=$c VRUN_CACHE_DIR=$c/vrun "$vrun" -device "$dev" -v -json "$model" 2>"$c/stderr") || {
				echo "$dev: vrun failed:" >&2
				cat "$c/stderr" >&2
				break
			}
			plan=$(printf '%s' "$out" | sed -n 's/.*"plan_ms": *\([0-9.]*\).*/\1/p')
			first=$(printf '%s' "$out" | sed -n 's/.*"first_run_ms": *\([0-9.]*\).*/\1/p')
			awk -v d="$dev" -v r="$r" -v k="$k" -v p="$plan" -v f="$first" \
				'BEGIN { printf "%-10s %-4s %-5s %10.1f %12.1f %10.1f\n", d, r, k, p, f, p + f }'
		done
		rm -rf "$c"
		r=$((r + 1))
	done
done
