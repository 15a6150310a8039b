#!/bin/sh
# bench/vktune.sh: what the Vulkan GEMM autotuner (VRUN_VK_TUNE, see
# docs/devices.md) gains over the rules, side by side in one run.
#
#   bench/vktune.sh SUITE OUTDIR [suite run flags...]
#   bench/vktune.sh ./suite out -kinds gemm,conv,model -backends vulkan:0 -baselines pytorch
#
# SUITE is a built bench/suite binary. In one fresh cache directory it
# runs `SUITE run` with the given flags four times: with the rules
# (VRUN_VK_TUNE=0), tuning (VRUN_VK_TUNE=1: each GEMM and convolution
# shape is timed on the device the first time it is lowered, which the
# suite's warm-up runs absorb), then the rules and the cached picks
# (VRUN_VK_TUNE unset) once more, so that each side has a run before and
# after the other. It writes OUTDIR/rules1.json, tune.json, rules2.json
# and picks.json (render them with `suite render -in FILE`; the header
# names the VRUN_VK_TUNE of each), the suite's logs, and OUTDIR/picks/,
# the tuning cache with each shape's pick and the GPU times of the pick
# and of the rules' choice.
set -eu
if [ $# -lt 2 ]; then
	echo "usage: $0 SUITE OUTDIR [suite run flags...]" >&2
	exit 2
fi
suite=$1 out=$2
shift 2
mkdir -p "$out"
cache=$(mktemp -d)
# keep the picks of a run cut short (a timeout's TERM) too
save() {
	mkdir -p "$out/picks"
	cp "$cache"/vulkan-tune-*.json "$out/picks/" 2>/dev/null || echo "no tuning cache was written (no Vulkan device?)"
	rm -rf "$cache"
}
trap save EXIT
trap 'exit 143' TERM INT
export VRUN_CACHE_DIR="$cache"
one() { # one NAME TUNE: a suite run with VRUN_VK_TUNE=TUNE ("" unsets it)
	name=$1 tune=$2
	shift 2
	if [ -n "$tune" ]; then
		VRUN_VK_TUNE=$tune "$suite" run "$@" -section "vktune-$name" -out "$out/$name.json" 2>"$out/$name.log"
	else
		env -u VRUN_VK_TUNE "$suite" run "$@" -section "vktune-$name" -out "$out/$name.json" 2>"$out/$name.log"
	fi
	echo "$name: $out/$name.json"
}
one rules1 0 "$@"
one tune 1 "$@"
one rules2 0 "$@"
one picks "" "$@"
