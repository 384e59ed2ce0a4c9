#!/usr/bin/env bash
# Installs the build tree into a private prefix, builds the machine-minimal
# example against that installed SDK only (no path into the source tree),
# and checks that qgpu-host loads it.
#   out_of_tree.sh BUILD_DIR EXAMPLE_SRC WORK_DIR CMAKE [FLAGS]
# FLAGS: compiler and linker flags the example needs to link the installed SDK (the sanitizer
# flags, when the build tree is instrumented).
set -euo pipefail
build=$1 example=$2 work=$3 cmake=$4 flags=${5:-}
rm -rf "$work"
mkdir -p "$work"
prefix="$work/prefix"
"$cmake" --install "$build" --prefix "$prefix" >"$work/install.log"
# The example sees only the installed SDK: no include path into this repository.
"$cmake" -S "$example" -B "$work/build" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_CXX_FLAGS="$flags" \
  -DCMAKE_SHARED_LINKER_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="$flags" >"$work/configure.log"
"$cmake" --build "$work/build" >"$work/build.log"
plugin=$(find "$work/build" -name 'qgpu_machine_minimal.so' | head -n 1)
[ -n "$plugin" ] || { echo "FAIL: the example did not produce qgpu_machine_minimal.so"; exit 1; }
# The installed host finds the installed plugins next to itself, and the example through --plugin-dir.
out=$("$prefix/bin/qgpu-host" --plugin-dir "$(dirname "$plugin")" info --json)
grep -q '"name": "machine_minimal"' <<<"$out" || { echo "FAIL: machine_minimal not listed"; echo "$out"; exit 1; }
grep -q '"name": "machine_simt"' <<<"$out" || { echo "FAIL: installed plugins not found next to the installed host"; exit 1; }
# And it runs when a config selects it.
cat >"$work/minimal.yaml" <<YAML
version: 1
machine:
  plugin: machine_minimal
  library: $plugin
  words: 8
YAML
out=$("$prefix/bin/qgpu-host" --config "$work/minimal.yaml" info)
grep -Eq 'machine +machine_minimal .*\[selected by config\]' <<<"$out" || { echo "FAIL: not selected"; echo "$out"; exit 1; }
grep -q 'words: *8' <<<"$out" || { echo "FAIL: option not passed"; echo "$out"; exit 1; }
# The host asks the machine what it can do before compiling: the template lowers nothing.
set +e
err=$("$prefix/bin/qgpu-host" --config "$work/minimal.yaml" run "$example/../../examples/dot.cu" --grid 1 --block 4 \
  --arg 'a=[1,2,3]' --arg 'b=[4,5,6]' --arg 'out=[0]' --arg n=3 2>&1 >/dev/null)
rc=$?
set -e
[ "$rc" = 2 ] && grep -q "^qgpu-host: error: machine_minimal: capability 'lower' is not available" <<<"$err" ||
  { echo "FAIL: run on a machine without lower(): exit $rc: $err"; exit 1; }
echo "ok: machine_minimal built against the installed SDK and loaded"
