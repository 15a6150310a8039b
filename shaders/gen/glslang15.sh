#!/usr/bin/env bash
# glslangValidator 15 (Debian 13 "trixie") on a Debian 12 machine, for the shaders that enable
# GL_KHR_cooperative_matrix or GL_NV_cooperative_matrix2 (Debian 12's glslc, shaderc 2023.2 with
# glslang 12, compiles only GL_NV_cooperative_matrix). go generate ./shaders runs it (gen/main.go).
#
# It downloads glslang-tools and spirv-tools from Debian's trixie suite with a private apt
# configuration (the system's apt sources are not touched), unpacks them with the trixie C and C++
# runtime into a cache folder, and runs glslangValidator through that runtime's own loader. Nothing
# is installed system-wide; the first run needs network access to deb.debian.org.
#
#   glslang15.sh -V --target-env vulkan1.3 in.comp -o out.spv     (any glslangValidator arguments)
#   VRUN_GLSLANG15_DIR=/path  where to keep it (default: ${XDG_CACHE_HOME:-$HOME/.cache}/vrun-glslang15)
#
# Elsewhere (Debian 13, or any glslang 15 build) point GLSLANG15 at glslangValidator instead.
set -euo pipefail
dir=${VRUN_GLSLANG15_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/vrun-glslang15}
root=$dir/root
if [ ! -x "$root/usr/bin/glslangValidator" ]; then
  mkdir -p "$dir/apt/lists/partial" "$dir/apt/cache/archives/partial" "$dir/debs" "$root"
  echo "deb http://deb.debian.org/debian trixie main" > "$dir/apt/sources.list"
  A=(-o Dir::Etc::sourcelist="$dir/apt/sources.list" -o Dir::Etc::sourceparts=- \
     -o Dir::State::Lists="$dir/apt/lists" -o Dir::Cache="$dir/apt/cache" -o APT::Sandbox::User=root)
  apt-get "${A[@]}" -qq update >&2
  (cd "$dir/debs" && apt-get "${A[@]}" -qq download glslang-tools spirv-tools libc6 libstdc++6 libgcc-s1 >&2)
  for f in "$dir"/debs/*.deb; do dpkg -x "$f" "$root"; done
fi
lib=$root/usr/lib/x86_64-linux-gnu
exec "$lib/ld-linux-x86-64.so.2" --library-path "$lib:$root/lib/x86_64-linux-gnu" "$root/usr/bin/glslangValidator" "$@"
