#!/usr/bin/env bash
# Gathers the seed corpora of the fuzz harnesses from the repository into OUT (default
# build-fuzz/fuzz-corpus/seeds), one directory per harness:
#   ptx_parser, ptx_compile  the suite's PTX (tests/kernels/ptx-nvcc, plugins/frontend_ptx/tests/inputs and lit),
#                            multi-kernel files also split into one file per .entry; with clang++-16 also the
#                            clang PTX of tests/kernels/cu (as the frontend compiles it)
#   config                   configs/*.yaml, tests/configs/*.yaml*
#   launch_args              the string literals of tests/core/launch_args_test.cpp, one per file
#   gpu_expression           the string literals of tests/core/gpu_expression_test.cpp, one per file
# Usage: fuzz/seeds.sh [OUT]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
out="${1:-$root/build-fuzz/fuzz-corpus/seeds}"
mkdir -p "$out"/{ptx_parser,ptx_compile,config,launch_args,gpu_expression}

# --- PTX: whole files, then each .entry with the file's header (what precedes the first kernel).
ptx_files=("$root"/tests/kernels/ptx-nvcc/*.ptx "$root"/plugins/frontend_ptx/tests/inputs/*.ptx
           "$root"/plugins/frontend_ptx/tests/lit/*.ptx)
if command -v clang++-16 >/dev/null; then
  mkdir -p "$out/.clang"
  for f in "$root"/tests/kernels/cu/*.cu; do
    clang++-16 -x cuda --cuda-device-only -nocudainc -nocudalib --cuda-path=/nonexistent \
      --cuda-feature=+ptx70 --cuda-gpu-arch=sm_75 -O2 -include "$root/plugins/frontend_ptx/share/qgpu_cuda_prelude.h" \
      -S "$f" -o "$out/.clang/$(basename "$f" .cu).ptx" 2>/dev/null || true
  done
  ptx_files+=("$out"/.clang/*.ptx)
fi
for f in "${ptx_files[@]}"; do
  [ -f "$f" ] || continue
  base=$(basename "$(dirname "$f")"); base=${base#.}_$(basename "$f" .ptx)
  cp "$f" "$out/ptx_parser/$base.ptx"
  awk -v prefix="$out/ptx_parser/$base.entry" '
    /^[ \t]*(\.visible[ \t]+|\.weak[ \t]+)?\.entry[ \t]/ { n++; if (n == 1) { header = text } text = header }
    { text = text $0 "\n" }
    n > 0 && /^}/ { file = prefix n ".ptx"; printf "%s", text > file; close(file); text = header }
  ' "$f"
done
# A single-kernel split equals its whole file: keep one.
for f in "$out"/ptx_parser/*.entry1.ptx; do
  [ -f "$f" ] || continue
  [ -f "${f%.entry1.ptx}.entry2.ptx" ] || rm -f "$f"
done
cp "$out"/ptx_parser/* "$out/ptx_compile/"

# --- YAML configs.
for f in "$root"/configs/*.yaml "$root"/tests/configs/*.yaml*; do cp "$f" "$out/config/$(basename "$f")"; done

# --- String literals of the unit tests, one per file (C escapes \" and \\ undone).
literals() {
  grep -o '"\([^"\\]\|\\.\)*"' "$1" | sed -e 's/^"//' -e 's/"$//' -e 's/\\"/"/g' -e 's/\\\\/\\/g' | sort -u
}
i=0
while IFS= read -r s; do printf '%s' "$s" > "$out/launch_args/test$((i++))"; done \
  < <(literals "$root/tests/core/launch_args_test.cpp")
i=0
while IFS= read -r s; do printf '%s' "$s" > "$out/gpu_expression/test$((i++))"; done \
  < <(literals "$root/tests/core/gpu_expression_test.cpp")

for d in ptx_parser ptx_compile config launch_args gpu_expression; do
  echo "$d: $(ls "$out/$d" | wc -l) seeds"
done
