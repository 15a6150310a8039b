#!/usr/bin/env bash
# vrun's test command: installs what the tests need on Debian/Ubuntu, then
# runs the whole test suite. Usage:  ./test.sh [extra go test flags]
#
# Packages: lavapipe (CPU Vulkan) with the validation layers, glslc, pocl
# (CPU OpenCL) with the ICD loader, NumPy (reference scripts), the ONNX
# checker (python3-onnx) and the MinGW cross compiler (Windows cgo build).
# When npm is installed, onnxruntime-node goes to .ort/ (git-ignored) for
# the ONNX export tests. Set VRUN_NO_INSTALL=1 to skip the install step.
set -euo pipefail
cd "$(dirname "$0")"

pkgs=(mesa-vulkan-drivers vulkan-validationlayers glslc pocl-opencl-icd ocl-icd-libopencl1
      python3-numpy python3-onnx gcc-mingw-w64-x86-64)
if [ "${VRUN_NO_INSTALL:-}" != 1 ]; then
  missing=()
  for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    sudo=""
    [ "$(id -u)" -ne 0 ] && sudo=sudo
    echo "test.sh: installing ${missing[*]}"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
  if command -v npm >/dev/null && [ ! -f .ort/node_modules/onnxruntime-node/package.json ]; then
    echo "test.sh: installing onnxruntime-node into .ort/"
    npm install --ignore-scripts --no-audit --no-fund --silent --prefix .ort onnxruntime-node >/dev/null ||
      echo "test.sh: npm install onnxruntime-node failed; the onnxruntime export tests will skip"
  fi
fi

# Tests turn on the Vulkan validation layer and fail on any message.
export VRUN_VK_VALIDATION=1
# Keep pipeline and program caches out of the user's home.
export VRUN_CACHE_DIR="${VRUN_CACHE_DIR:-$(mktemp -d)}"
go test -count=1 "$@" ./...
