#!/usr/bin/env bash
# build.sh compiles the vrun CUDA kernels to PTX and records the hash of
# their sources, so the embedded PTX and the sources cannot drift apart
# (TestPTXMatchesSources checks it).
#
#   cudashim/kernels/build.sh                # needs nvcc (CUDA 13.0)
#   cudashim/kernels/build.sh --placeholder  # no nvcc: placeholder PTX
#
# Output: kernels.ptx (from kernels.cu, which includes every part) and
# kernels.ptx.sha256:
#
#   sources <sha256 of the sources>
#   ptx <sha256 of kernels.ptx>         (or the line "placeholder")
#
# The sources hash is the sha256 of, for each of *.cu, *.cuh and build.sh
# in byte order of their names, the name, a newline and the file's bytes.
#
# The PTX targets the virtual architecture compute_75, so the driver JITs
# it for any GPU from sm_75 (Turing) up. PTX from nvcc 13.0 declares PTX
# ISA 9.0 (".version 9.0"), which needs a driver of the CUDA 13.0 branch
# (r580) or newer. Override the compiler with NVCC=/path/to/nvcc.
set -euo pipefail
cd "$(dirname "$0")"

srcs=$(ls -1 -- *.cu *.cuh build.sh | LC_ALL=C sort)
src_hash=$(for f in $srcs; do printf '%s\n' "$f"; cat -- "$f"; done | sha256sum | cut -d' ' -f1)

if [ "${1:-}" = "--placeholder" ]; then
  printf '%s\n' "// vrun placeholder: no PTX was built. Run cudashim/kernels/build.sh on a machine with nvcc." >kernels.ptx
  printf 'sources %s\nplaceholder\n' "$src_hash" >kernels.ptx.sha256
  echo "build.sh: wrote placeholder kernels.ptx (sources $src_hash)"
  exit 0
fi

NVCC=${NVCC:-nvcc}
if ! command -v "$NVCC" >/dev/null 2>&1; then
  for d in /usr/local/cuda/bin /usr/local/cuda-13.0/bin /opt/cuda/bin; do
    if [ -x "$d/nvcc" ]; then NVCC="$d/nvcc"; break; fi
  done
fi
"$NVCC" --version | tail -n 2
tmp=$(mktemp kernels.ptx.XXXXXX)
trap 'rm -f "$tmp"' EXIT
"$NVCC" -ptx -arch=compute_75 -O3 -std=c++17 -o "$tmp" kernels.cu
mv -f "$tmp" kernels.ptx
trap - EXIT
ptx_hash=$(sha256sum kernels.ptx | cut -d' ' -f1)
printf 'sources %s\nptx %s\n' "$src_hash" "$ptx_hash" >kernels.ptx.sha256
echo "build.sh: wrote kernels.ptx ($(grep -m1 '^\.version' kernels.ptx), $(wc -c <kernels.ptx) bytes) and kernels.ptx.sha256"
