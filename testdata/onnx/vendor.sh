#!/bin/sh
# vendor.sh re-vendors the ONNX backend node-test cases that pass on the
# CPU into testdata/onnx/node (model.onnx and test_data_set_0 of each), so
# that a fresh clone runs them without ../shared (TestConformanceVendored
# in model/onnx).
#
# Usage: testdata/onnx/vendor.sh [corpus.tgz]
#
# The corpus defaults to $VRUN_ONNX_CORPUS, else ../shared/onnx-node-tests.tgz
# next to the module. Cases larger than MAXCASE bytes (default 48 KiB) are
# left out, and vendoring stops adding cases at BUDGET bytes in all
# (default 7.5 MiB), taking cases in name order.
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
corpus=${1:-${VRUN_ONNX_CORPUS:-$root/../shared/onnx-node-tests.tgz}}
maxcase=${MAXCASE:-49152}
budget=${BUDGET:-7864320}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

cd "$root"
go run ./cmd/vrun-onnxtest -device cpu -corpus "$corpus" -list pass >"$tmp/pass"
mkdir "$tmp/x"
tar xzf "$corpus" -C "$tmp/x"
dst=testdata/onnx/node
rm -rf "$dst"
mkdir -p "$dst"
total=0 n=0 big=0
while read -r name; do
	src=$tmp/x/node/$name
	[ -d "$src" ] || src=$(find "$tmp/x" -maxdepth 3 -type d -name "$name" | head -n 1)
	[ -n "$src" ] && [ -d "$src/test_data_set_0" ] || continue
	size=$(cat "$src/model.onnx" "$src"/test_data_set_0/*.pb | wc -c)
	if [ "$size" -gt "$maxcase" ]; then
		big=$((big + 1))
		continue
	fi
	[ $((total + size)) -le "$budget" ] || break
	mkdir -p "$dst/$name/test_data_set_0"
	cp "$src/model.onnx" "$dst/$name/"
	cp "$src"/test_data_set_0/*.pb "$dst/$name/test_data_set_0/"
	total=$((total + size))
	n=$((n + 1))
done <"$tmp/pass"
echo "vendored $n cases, $total bytes, into $dst ($big passing cases over $maxcase bytes left out)"
