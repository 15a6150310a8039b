#!/usr/bin/env bash
# build.sh compiles the vrun CUDA kernels to PTX and records the hash of
# their sources, so the embedded PTX and the sources cannot drift apart
# (TestPTXMatchesSources checks it).
#
#   cudashim/kernels/build.sh                        # needs nvcc (CUDA 13.0): all three modules
#   cudashim/kernels/build.sh --indexed              # needs nvcc: indexed.ptx only
#   cudashim/kernels/build.sh --optim                # needs nvcc: optim.ptx only
#   cudashim/kernels/build.sh --placeholder          # no nvcc: placeholders for all three
#   cudashim/kernels/build.sh --indexed-placeholder  # no nvcc: placeholder indexed.ptx only
#   cudashim/kernels/build.sh --optim-placeholder    # no nvcc: placeholder optim.ptx only
#
# There are three PTX modules:
#
#   kernels.ptx  from kernels.cu, which includes every part except indexed.cu
#                and optim.cu
#   indexed.ptx  from indexed.cu (GatherElements, ScatterElements, TopK)
#   optim.ptx    from optim.cu (OptimStep)
#
# each with a hash file (kernels.ptx.sha256, indexed.ptx.sha256,
# optim.ptx.sha256):
#
#   sources <sha256 of the module's sources>
#   ptx <sha256 of the PTX>         (or the line "placeholder")
#
# A module's sources hash is the sha256 of, for each of its sources in
# byte order of their names, the name, a newline and the file's bytes.
# The sources of kernels.ptx are *.cu except indexed.cu and optim.cu, *.cuh
# and build.sh; those of indexed.ptx are indexed.cu, *.cuh and build.sh;
# those of optim.ptx are optim.cu, *.cuh and build.sh.
#
# The device opens with a placeholder indexed.ptx or optim.ptx (reporting
# their ops as unsupported), but not with a placeholder kernels.ptx.
#
# Next to each PTX module build.sh writes a fatbin (kernels.fatbin,
# indexed.fatbin, optim.fatbin) holding the module compiled to SASS for
# sm_80 (Ampere: runs on sm_80, sm_86, sm_87, sm_89) and sm_90 (Hopper),
# compressed, with a hash file of its own (module.fatbin.sha256:
# "sources <hash>" and "fatbin <sha256 of the fatbin>"). The device loads
# the fatbin first, so those GPUs start without a PTX JIT, and falls back
# to the PTX on any other GPU. A placeholder fatbin is empty.
#
# The PTX targets the virtual architecture compute_75, so the driver JITs
# it for any GPU from sm_75 (Turing) up. PTX from nvcc 13.0 declares PTX
# ISA 9.0 (".version 9.0"), which needs a driver of the CUDA 13.0 branch
# (r580) or newer. Override the compiler with NVCC=/path/to/nvcc.
set -euo pipefail
cd "$(dirname "$0")"

hash_of() { for f in "$@"; do printf '%s\n' "$f"; cat -- "$f"; done | sha256sum | cut -d' ' -f1; }
main_srcs=$(ls -1 -- *.cu *.cuh build.sh | grep -vx -e 'indexed.cu' -e 'optim.cu' | LC_ALL=C sort)
indexed_srcs=$(ls -1 -- indexed.cu *.cuh build.sh | LC_ALL=C sort)
optim_srcs=$(ls -1 -- optim.cu *.cuh build.sh | LC_ALL=C sort)
# shellcheck disable=SC2086
src_hash=$(hash_of $main_srcs)
# shellcheck disable=SC2086
indexed_hash=$(hash_of $indexed_srcs)
# shellcheck disable=SC2086
optim_hash=$(hash_of $optim_srcs)

placeholder() { # module.ptx sources-hash
  printf '%s\n' "// vrun placeholder: no PTX was built. Run cudashim/kernels/build.sh on a machine with nvcc." >"$1"
  printf 'sources %s\nplaceholder\n' "$2" >"$1.sha256"
  : >"${1%.ptx}.fatbin"
  printf 'sources %s\nplaceholder\n' "$2" >"${1%.ptx}.fatbin.sha256"
  echo "build.sh: wrote placeholder $1 (sources $2)"
}

mode=${1:-}
case "$mode" in
  "" | --indexed | --optim | --placeholder | --indexed-placeholder | --optim-placeholder) ;;
  *) echo "build.sh: unknown option $mode" >&2; exit 2 ;;
esac
if [ "$mode" = "--placeholder" ]; then
  placeholder kernels.ptx "$src_hash"
  placeholder indexed.ptx "$indexed_hash"
  placeholder optim.ptx "$optim_hash"
  exit 0
fi
if [ "$mode" = "--indexed-placeholder" ]; then
  placeholder indexed.ptx "$indexed_hash"
  exit 0
fi
if [ "$mode" = "--optim-placeholder" ]; then
  placeholder optim.ptx "$optim_hash"
  exit 0
fi

NVCC=${NVCC:-nvcc}
if ! command -v "$NVCC" >/dev/null 2>&1; then
  for d in /usr/local/cuda/bin /usr/local/cuda-13.0/bin /opt/cuda/bin; do
    if [ -x "$d/nvcc" ]; then NVCC="$d/nvcc"; break; fi
  done
fi
"$NVCC" --version | tail -n 2

tmp=
compile() { # source.cu module.ptx sources-hash
  tmp=$(mktemp "$2.XXXXXX")
  trap 'rm -f "$tmp"' EXIT
  "$NVCC" -ptx -arch=compute_75 -O3 -std=c++17 -o "$tmp" "$1"
  mv -f "$tmp" "$2"
  trap - EXIT
  local ptx_hash
  ptx_hash=$(sha256sum "$2" | cut -d' ' -f1)
  printf 'sources %s\nptx %s\n' "$3" "$ptx_hash" >"$2.sha256"
  echo "build.sh: wrote $2 ($(grep -m1 '^\.version' "$2"), $(wc -c <"$2") bytes) and $2.sha256"
  local fb=${2%.ptx}.fatbin
  tmp=$(mktemp "$fb.XXXXXX")
  trap 'rm -f "$tmp"' EXIT
  "$NVCC" -fatbin -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 \
    -Xfatbin -compress-all -O3 -std=c++17 -o "$tmp" "$1"
  mv -f "$tmp" "$fb"
  trap - EXIT
  printf 'sources %s\nfatbin %s\n' "$3" "$(sha256sum "$fb" | cut -d' ' -f1)" >"$fb.sha256"
  echo "build.sh: wrote $fb ($(wc -c <"$fb") bytes) and $fb.sha256"
}

if [ -z "$mode" ]; then
  compile kernels.cu kernels.ptx "$src_hash"
fi
if [ "$mode" != "--optim" ]; then
  compile indexed.cu indexed.ptx "$indexed_hash"
fi
if [ "$mode" != "--indexed" ]; then
  compile optim.cu optim.ptx "$optim_hash"
fi
