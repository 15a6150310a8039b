#!/usr/bin/env bash
# Runs a program with Mesa 26's lavapipe as its only Vulkan driver: the
# first lavapipe with VK_KHR_cooperative_matrix (f16 x f16 -> f32 on 8x8x8
# subgroup fragments), so that the cooperative-matrix kernels
# (shaders/mmcm.comp, shaders/convcm.comp) run on a machine without a GPU.
# Debian 12's lavapipe (Mesa 22.3) has no cooperative matrices.
#
#   go test -exec "$PWD/.ci/lavapipe26.sh" -run Coop ./rt/vulkan
#   .ci/lavapipe26.sh ./vrun devices -v
#
# It downloads mesa-vulkan-drivers from Debian 13's trixie-backports, with
# the Vulkan loader, the validation layers and the C, C++ and LLVM
# runtimes they need from trixie, through a private apt configuration (the
# system's apt sources are not touched), unpacks them into a cache folder
# and runs the program through that runtime's own dynamic loader. Nothing
# is installed system-wide. VRUN_VK_COOPMAT defaults to 1 here (vrun keeps
# cooperative matrices off on CPU devices unless asked).
#
#   VRUN_LAVAPIPE26_DIR=/path  where to keep it (default: ${XDG_CACHE_HOME:-$HOME/.cache}/vrun-lavapipe26)
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: $0 PROGRAM [ARGS...]" >&2; exit 2; }
dir=${VRUN_LAVAPIPE26_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/vrun-lavapipe26}
root=$dir/root
lib=$root/usr/lib/x86_64-linux-gnu
# go test runs several packages' binaries through this script at once:
# one of them fetches, the others wait.
mkdir -p "$dir"
exec 9>"$dir/lock"
flock 9
if [ ! -f "$dir/ok" ]; then
  rm -rf "$root" "$dir/debs"
  mkdir -p "$dir/apt/lists/partial" "$dir/apt/cache/archives/partial" "$dir/debs" "$root"
  printf '%s\n' "deb http://deb.debian.org/debian trixie main" \
    "deb http://deb.debian.org/debian trixie-backports main" > "$dir/apt/sources.list"
  A=(-o Dir::Etc::sourcelist="$dir/apt/sources.list" -o Dir::Etc::sourceparts=- -o Dir::Etc::preferencesparts=-
     -o Dir::State::Lists="$dir/apt/lists" -o Dir::Cache="$dir/apt/cache" -o APT::Sandbox::User=root)
  apt-get "${A[@]}" -qq update >&2
  (cd "$dir/debs" && apt-get "${A[@]}" -qq download mesa-vulkan-drivers/trixie-backports \
    libvulkan1 vulkan-validationlayers libc6 libstdc++6 libgcc-s1 libllvm19 libdrm2 libexpat1 zlib1g \
    libzstd1 libxcb1 libxcb-dri3-0 libxcb-present0 libxcb-randr0 libxcb-shm0 libxcb-sync1 libxcb-xfixes0 \
    libx11-xcb1 libxshmfence1 libwayland-client0 libxau6 libxdmcp6 libbsd0 libmd0 libffi8 libedit2 libxml2 \
    libtinfo6 libz3-4 liblzma5 libdisplay-info2 >&2)
  for f in "$dir"/debs/*.deb; do dpkg -x "$f" "$root"; done
  # The package list above is the driver's and the layer's library
  # closure as of Mesa 26.1: a later backport that needs another library
  # must fail here, loudly, not leave the tests without a device.
  for so in "$lib/libvulkan_lvp.so" "$lib/libVkLayer_khronos_validation.so" "$lib/libvulkan.so.1"; do
    missing=$("$lib/ld-linux-x86-64.so.2" --library-path "$lib:$root/lib/x86_64-linux-gnu" --list "$so" 2>&1 | grep -E "not found|error" || true)
    if [ -n "$missing" ]; then
      echo "$0: $so: unresolved libraries (update the package list):" >&2
      echo "$missing" >&2
      exit 1
    fi
  done
  # The driver and layer manifests name their libraries by file name: make
  # them absolute, so that the loader finds them in this root.
  sed "s#\"library_path\": \"[^\"]*\"#\"library_path\": \"$lib/libvulkan_lvp.so\"#" \
    "$root/usr/share/vulkan/icd.d/lvp_icd.json" > "$dir/lvp_icd.json"
  mkdir -p "$dir/layers"
  sed "s#\"library_path\": \"[^\"]*\"#\"library_path\": \"$lib/libVkLayer_khronos_validation.so\"#" \
    "$root/usr/share/vulkan/explicit_layer.d/VkLayer_khronos_validation.json" > "$dir/layers/VkLayer_khronos_validation.json"
  touch "$dir/ok"
fi
exec 9>&-
export VK_DRIVER_FILES=$dir/lvp_icd.json VK_ICD_FILENAMES=$dir/lvp_icd.json VK_LAYER_PATH=$dir/layers
export VRUN_VK_COOPMAT=${VRUN_VK_COOPMAT:-1}
exec "$lib/ld-linux-x86-64.so.2" --library-path "$lib:$root/lib/x86_64-linux-gnu" "$@"
