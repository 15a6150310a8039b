#!/usr/bin/env bash
# Windows CI under Wine: the pure-Go test suite as cross-compiled Windows
# test binaries (GOOS=windows go test -c, CGO_ENABLED=0: the CPU backend
# and everything above it), then a smoke test of the Windows vrun.exe
# (demo, devices, an ONNX model, convert, the converted model), whose
# outputs must match the Linux build's byte for byte.
#
# Needs Debian's wine64 (Wine 8) and the MinGW cross compiler, which
# test.sh installs. Two things stand between Wine 8 and a Go 1.24+ program;
# both are worked around here, for CI only:
#  - ProcessPrng: see bcryptprimitives.c; a stand-in DLL is built with
#    MinGW and put into the prefix's system32.
#  - os.RemoveAll: since Go 1.26 it deletes through NtSetInformationFile
#    with FileDispositionInformationEx (Windows 10 1607+), and falls back
#    to the older call when Windows answers "invalid info class". Wine 8
#    answers STATUS_NOT_IMPLEMENTED instead, so every t.TempDir cleanup
#    fails ("unlinkat ...: Invalid function"). A build overlay of the
#    standard library's internal/syscall/windows/at_windows.go adds that
#    status to the fallback's list; nothing of vrun changes.
# Usage: .ci/wine.sh [extra test binary flags, e.g. -test.run X]
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

wine=$(command -v wine64 || true)
[ -n "$wine" ] || [ ! -x /usr/lib/wine/wine64 ] || wine=/usr/lib/wine/wine64
[ -n "$wine" ] || wine=$(command -v wine || true)
if [ -z "$wine" ]; then echo "wine.sh: wine64 is not installed (apt-get install wine64)"; exit 1; fi

work=$(mktemp -d /tmp/vrun-wine.XXXXXX)
trap '"${wineserver:-true}" -k 2>/dev/null || true; rm -rf "$work"' EXIT
export WINEPREFIX=$work/prefix WINEDEBUG=-all WINEDLLOVERRIDES="mscoree,mshtml=" WINEARCH=win64
wineserver=$(command -v wineserver || echo /usr/lib/wine/wineserver)
export GOOS=windows GOARCH=amd64 CGO_ENABLED=0
# One persistent wineserver for the whole run (the trap stops it). Left to
# itself, the server exits a few seconds after its last client, and a
# client that connects while it is exiting dies with "wine client error:0:
# recvmsg: Connection reset by peer" before the program starts: with two
# test binaries started back to back, that failed a CI run.
mkdir -p "$WINEPREFIX"
"$wineserver" -p

echo "   wine prefix and the ProcessPrng stand-in"
"$wine" wineboot --init >/dev/null 2>&1 || true
x86_64-w64-mingw32-gcc -O2 -shared -o "$WINEPREFIX/drive_c/windows/system32/bcryptprimitives.dll" \
  .ci/bcryptprimitives.c -ladvapi32

src=$(go env GOROOT)/src/internal/syscall/windows/at_windows.go
pat='^\t\tSTATUS_NOT_SUPPORTED: '
overlay=()
if grep -qP "$pat" "$src"; then
  sed -E 's/^(\t\tSTATUS_NOT_SUPPORTED)(: )/\1, NTStatus(0xC0000002) /; s/^(\t\tSTATUS_NOT_SUPPORTED, NTStatus\(0xC0000002\)) /\1: \/\/ STATUS_NOT_IMPLEMENTED (Wine 8);/' \
    "$src" > "$work/at_windows.go"
  printf '{"Replace":{"%s":"%s"}}\n' "$src" "$work/at_windows.go" > "$work/overlay.json"
  overlay=(-overlay "$work/overlay.json")
else
  echo "   note: $src changed; building without the Wine 8 RemoveAll overlay"
fi

echo "   test binaries"
# Every package with tests builds for Windows; these run under Wine. Left
# out (VRUN_WINE_ALL=1 runs them too): the gradient table, the vendored
# ONNX corpus and the example trainings, pure arithmetic on code paths that
# the engine, conformance and train tests already take, which would add
# about two minutes under Wine and nothing of Windows.
skip='^(internal/gradconf|internal/onnxcorpus|examples/.*)$'
[ "${VRUN_WINE_ALL:-}" != 1 ] || skip='^$'
pkgs=()
for dir in $(go list -f '{{if or .TestGoFiles .XTestGoFiles}}{{.Dir}}{{end}}' ./...); do
  rel=${dir#"$root"}; rel=${rel#/}; rel=${rel:-.}
  [[ "$rel" =~ $skip ]] || pkgs+=("$rel")
done
mkdir -p "$work/bin"
exe() { local n=${1//\//_}; [ "$n" != . ] || n=root; echo "$work/bin/$n.test.exe"; }
# One P: Wine wakes parked threads through wineserver, which makes Go's
# scheduler (and the CPU backend's fan-out) 5-10 times slower with two.
# Two test binaries run at a time instead.
runone() { # runone REL [flags]: run one package's test binary in its folder
  local rel=$1 start=$SECONDS; shift
  if (cd "$root/$rel" && GOMAXPROCS=1 "$wine" "$(exe "$rel")" -test.short -test.timeout 10m "$@" >"$(exe "$rel").log" 2>&1); then
    echo "   ok   $rel ($((SECONDS - start))s)"
  else
    echo "   FAIL $rel"; tail -40 "$(exe "$rel").log"; return 1
  fi
}
overlay_s="${overlay[*]}"
export work root wine overlay_s
export -f exe runone
printf '%s\n' "${pkgs[@]}" |
  xargs -P 2 -I{} bash -c 'overlay=($overlay_s); go test "${overlay[@]}" -c -o "$(exe "$0")" "./$0"' {}
fail=0
printf '%s\n' "${pkgs[@]}" | xargs -P 2 -I{} bash -c 'runone "$@"' _ {} "$@" || fail=1
[ "$fail" = 0 ] || { echo "wine.sh: Windows test binaries failed"; exit 1; }

echo "   CLI smoke test (vrun.exe)"
go build "${overlay[@]}" -o "$work/vrun.exe" ./cmd/vrun
GOOS= CGO_ENABLED=0 go build -o "$work/vrun" ./cmd/vrun
m=testdata/models/squeezenet1_1
run() { # run NAME ARGS...: vrun.exe and the Linux vrun with the same arguments
  local name=$1; shift
  mkdir -p "$work/win-$name" "$work/lin-$name"
  "$wine" "$work/vrun.exe" "$@" -o "$work/win-$name" >"$work/win-$name.txt" 2>&1 ||
    { echo "vrun.exe $*:"; cat "$work/win-$name.txt"; exit 1; }
  "$work/vrun" "$@" -o "$work/lin-$name" >"$work/lin-$name.txt" 2>&1 ||
    { echo "vrun $*:"; cat "$work/lin-$name.txt"; exit 1; }
  for f in "$work/lin-$name"/*.npy; do
    cmp "$f" "$work/win-$name/$(basename "$f")" ||
      { echo "wine.sh: $name: $(basename "$f") differs between Windows and Linux"; exit 1; }
  done
  echo "   ok   vrun $* ($(ls "$work/lin-$name" | wc -l) outputs identical)"
}
"$wine" "$work/vrun.exe" demo >"$work/demo.txt" 2>&1 || { cat "$work/demo.txt"; exit 1; }
grep -q "accuracy" "$work/demo.txt" || { echo "wine.sh: vrun.exe demo:"; cat "$work/demo.txt"; exit 1; }
echo "   ok   vrun demo: $(grep -m1 accuracy "$work/demo.txt")"
"$wine" "$work/vrun.exe" devices >"$work/devices.txt" 2>&1 || { cat "$work/devices.txt"; exit 1; }
grep -q "cpu:0" "$work/devices.txt" || { echo "wine.sh: vrun.exe devices:"; cat "$work/devices.txt"; exit 1; }
echo "   ok   vrun devices: $(grep -m1 cpu:0 "$work/devices.txt")"
run onnx -device cpu -i "x=$m.x.npy" "$m.onnx"
"$wine" "$work/vrun.exe" convert "$m.onnx" -o "$work/sq.bin" >"$work/convert.txt" 2>&1 ||
  { cat "$work/convert.txt"; exit 1; }
"$work/vrun" convert "$m.onnx" -o "$work/sq-linux.bin" >/dev/null
cmp "$work/sq.bin" "$work/sq-linux.bin" || { echo "wine.sh: convert wrote a different model.bin on Windows"; exit 1; }
echo "   ok   vrun convert (model.bin identical)"
run bin -device cpu -i "x=$m.x.npy" "$work/sq.bin"
for f in "$work/lin-onnx"/*.npy; do
  cmp "$f" "$work/win-bin/$(basename "$f")" || { echo "wine.sh: the converted model's output differs"; exit 1; }
done
# The cgo build (MinGW) with the GPU backends: it must start without the
# Vulkan, CUDA and OpenCL DLLs and say why each is unavailable.
CGO_ENABLED=1 CC=x86_64-w64-mingw32-gcc go build -o "$work/vrun-cgo.exe" ./cmd/vrun
# Wine passes OpenCL through to the host's ICDs. With pocl 3.1 behind
# that thunk (Wine 8) a process that has enumerated OpenCL devices
# sometimes never exits: the output is complete, then ExitProcess hangs
# (half of the runs of the same binary, old and new, here; none with the
# host's ICDs hidden). So the host's ICDs are hidden from this check, and
# opencl must say why it is unavailable, like vulkan and cuda.
mkdir -p "$work/no-icds"
OCL_ICD_VENDORS="$work/no-icds" timeout 300 "$wine" "$work/vrun-cgo.exe" devices >"$work/devices-cgo.txt" 2>&1 ||
  { echo "wine.sh: vrun.exe (cgo) devices failed (status $?):"; cat "$work/devices-cgo.txt"; exit 1; }
# Each backend must either list devices or say why it cannot.
for b in vulkan cuda opencl cpu; do
  grep -Eq "^($b .*unavailable: .+|$b:[0-9]+ )" "$work/devices-cgo.txt" ||
    { echo "wine.sh: vrun.exe (cgo) devices says nothing of $b:"; cat "$work/devices-cgo.txt"; exit 1; }
done
echo "   ok   vrun devices (cgo build): $(grep -Eo '^[a-z]+(:[0-9]+ | +unavailable)' "$work/devices-cgo.txt" | tr -s ' ' | paste -sd, -)"
echo "   Windows under Wine passed"
