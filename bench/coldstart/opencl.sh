#!/bin/sh
# bench/coldstart/opencl.sh: what the OpenCL backend's cold start depends
# on: one cold plan + first run per build setting, with the per-program
# build log (VRUN_CL_BUILDLOG), then a warm timed run with that setting.
#
#   bench/coldstart/opencl.sh VRUN MODEL.onnx DEVICE [SETTING...]
#   bench/coldstart/opencl.sh ./vrun resnet18.onnx opencl:1
#
# SETTING is NAME=ENV (ENV: space-separated VAR=VALUE pairs, without
# quotes inside); without any, it runs the list below. For each setting
# it makes fresh cache directories (as run.sh: HOME, XDG_CACHE_HOME,
# VRUN_CACHE_DIR; NVIDIA keeps its OpenCL JIT cache under HOME) and prints
#   plan_ms, first_run_ms   the cold run
#   progs                   programs built from source
#   build_sum, build_max    the sum and the longest of their build times
#   par                     build_sum / (last end - first start): about
#                           1 when the driver builds one program at a time
#   warm_med_ms             median of `-bench 50 -resident` with the
#                           programs now cached (did the setting cost speed?)
# and keeps the logs under $KEEP (default ./coldstart-opencl), one
# NAME.log per setting. The knobs (read by vrun at device Open):
#   VRUN_CL_JOBS=N      programs built at once (default GOMAXPROCS)
#   VRUN_CL_SPLIT=0|1   whole kernel files, or one kernel per program
#   VRUN_CL_OPTS=...    extra build options for every program
#   VRUN_CL_CONV=wide   the former conv tiles (a different program set)
#   VRUN_CL_BUILDCTX=N  build in N extra contexts, load the binaries
#                       (par > 1 where the driver serialises per context)
set -u
if [ $# -lt 3 ]; then
	echo "usage: $0 VRUN MODEL.onnx DEVICE [NAME=ENV...]" >&2
	exit 2
fi
vrun=$1 model=$2 dev=$3
shift 3
keep=${KEEP:-./coldstart-opencl}
mkdir -p "$keep"
if [ $# -eq 0 ]; then
	set -- "base=" "jobs1=VRUN_CL_JOBS=1" "jobs4=VRUN_CL_JOBS=4" "whole=VRUN_CL_SPLIT=0" \
		"mad=VRUN_CL_OPTS=-cl-mad-enable" "fast=VRUN_CL_OPTS=-cl-fast-relaxed-math" \
		"nvopt0=VRUN_CL_OPTS=-cl-nv-opt-level=0" "nvopt1=VRUN_CL_OPTS=-cl-nv-opt-level=1" \
		"nvopt2=VRUN_CL_OPTS=-cl-nv-opt-level=2" "unroll1=VRUN_CL_OPTS=-DMMA_UNROLL=1" \
		"unroll4=VRUN_CL_OPTS=-DMMA_UNROLL=4" "wide=VRUN_CL_CONV=wide" \
		"ctx4=VRUN_CL_BUILDCTX=4" "ctx16=VRUN_CL_BUILDCTX=16"
fi
printf '%-9s %9s %9s %6s %10s %10s %5s %12s\n' setting plan_ms first_ms progs build_sum build_max par warm_med_ms
for s in "$@"; do
	name=${s%%=*} envs=${s#*=}
	c=$(mktemp -d)
	log=$keep/$name.log
	: >"$log"
	# shellcheck disable=SC2086 # envs is a list of VAR=VALUE words
	out=$(env HOME="$c" XDG_CACHE_HOME="$c" VRUN_CACHE_DIR="$c/vrun" VRUN_CL_BUILDLOG="$log" $envs \
		"$vrun" -device "$dev" -v -json "$model" 2>"$c/stderr") || {
		printf '%-9s failed: %s\n' "$name" "$(tail -n 3 "$c/stderr" | tr '\n' ' ')"
		rm -rf "$c"
		continue
	}
	plan=$(printf '%s' "$out" | sed -n 's/.*"plan_ms": *\([0-9.]*\).*/\1/p')
	first=$(printf '%s' "$out" | sed -n 's/.*"first_run_ms": *\([0-9.]*\).*/\1/p')
	# shellcheck disable=SC2086
	warm=$(env HOME="$c" XDG_CACHE_HOME="$c" VRUN_CACHE_DIR="$c/vrun" $envs \
		"$vrun" -device "$dev" -bench 50 -resident -json "$model" 2>/dev/null |
		sed -n '/"bench"/,$s/.*"median_ms": *\([0-9.]*\).*/\1/p')
	awk -F'\t' -v n="$name" -v p="$plan" -v f="$first" -v w="${warm:-0}" '
		$5 ~ /^source/ { k++; s += $4; if ($4 > m) m = $4; if (!lo || $2 < lo) lo = $2; if ($3 > hi) hi = $3 }
		END { printf "%-9s %9.1f %9.1f %6d %10.1f %10.1f %5.2f %12.3f\n", n, p, f, k, s, m, (hi > lo ? s / (hi - lo) : 0), w }' "$log"
	rm -rf "$c"
done
