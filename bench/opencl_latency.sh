#!/bin/sh
# bench/opencl_latency.sh: batch-1 latency of models on an OpenCL device
# under its convolution tile rule ("auto": narrow tiles and shallow
# split-K) and the former one ("wide", VRUN_CL_CONV=wide), beside a
# Vulkan device, in one run (issue 15, goal 6: OpenCL within 2x of Vulkan).
#
#   bench/opencl_latency.sh VRUN MODELDIR CLDEVICE VKDEVICE [MODEL...]
#   bench/opencl_latency.sh .gpu/vrun /tmp/m opencl:1 vulkan:0
#
# MODELDIR holds MODEL.onnx (testdata/models/export.py writes them;
# default models resnet18 squeezenet1_1 mobilenet_v2 resnet50), each with
# input x of shape 1x3x224x224. Each run is `vrun -bench $BENCH -resident`
# (BENCH default 200); it prints the median and min ms, and the OpenCL /
# Vulkan ratio of the medians.
set -u
if [ $# -lt 4 ]; then
	echo "usage: $0 VRUN MODELDIR CLDEVICE VKDEVICE [MODEL...]" >&2
	exit 2
fi
vrun=$1 dir=$2 cl=$3 vk=$4
shift 4
[ $# -eq 0 ] && set -- resnet18 squeezenet1_1 mobilenet_v2 resnet50
bench=${BENCH:-200}
# med RULE DEVICE MODEL prints "median min" in ms, or "- -".
med() {
	out=$(VRUN_CL_CONV=$1 "$vrun" -device "$2" -bench "$bench" -resident -shape x=1x3x224x224 -json "$dir/$3.onnx" 2>/dev/null |
		sed -n '/"bench"/,$p')
	m=$(printf '%s\n' "$out" | sed -n 's/.*"median_ms": *\([0-9.]*\).*/\1/p')
	n=$(printf '%s\n' "$out" | sed -n 's/.*"min_ms": *\([0-9.]*\).*/\1/p')
	echo "${m:--} ${n:--}"
}
printf '%-14s %14s %14s %14s %9s %9s\n' model "$cl auto" "$cl wide" "$vk" auto/vk wide/vk
printf '%-14s %14s %14s %14s\n' "" median/min median/min median/min
for m in "$@"; do
	a=$(med "" "$cl" "$m")
	w=$(med wide "$cl" "$m")
	v=$(med "" "$vk" "$m")
	echo "$m $a $w $v" | awk '
		function f(x) { return x + 0 > 0 ? sprintf("%.3f", x) : "-" }
		function r(x, y) { return x + 0 > 0 && y + 0 > 0 ? sprintf("%.2f", x / y) : "-" }
		{ printf "%-14s %14s %14s %14s %9s %9s\n", $1, f($2) "/" f($3), f($4) "/" f($5), f($6) "/" f($7), r($2, $6), r($4, $6) }'
done
