#!/usr/bin/env bash
# Self-check of the suite's kernels without qgpu: every tests/kernels/cu/*.cu must compile
# to PTX with clang-16 (with the frontend's prelude, flags from TOOLCHAIN.md) and,
# where a CUDA toolkit is installed, with nvcc -ptx -arch=sm_75; clang's PTX is then
# validated with ptxas. Usage: check_compile.sh [OUTDIR]   (default: a temporary folder)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cu_dir=$(cd "$here/../cu" && pwd)
prelude=$(cd "$here/../../../plugins/frontend_ptx/share" && pwd)/qgpu_cuda_prelude.h
out=${1:-$(mktemp -d)}
mkdir -p "$out/clang" "$out/nvcc"
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
[ -x "$nvcc" ] || nvcc=""
ptxas=""
[ -n "$nvcc" ] && ptxas="$(dirname "$nvcc")/ptxas"
fail=0
count=0
for f in "$cu_dir"/*.cu; do
  name=$(basename "$f" .cu)
  count=$((count + 1))
  if ! clang++-16 -x cuda --cuda-device-only -nocudainc -nocudalib --cuda-path=/nonexistent \
      --cuda-feature=+ptx70 --cuda-gpu-arch=sm_75 -O2 -Wall -Werror -include "$prelude" \
      -S "$f" -o "$out/clang/$name.ptx" 2>"$out/clang/$name.err"; then
    echo "FAIL clang: $name"; sed 's/^/  /' "$out/clang/$name.err" | head -5; fail=1; continue
  fi
  if [ -n "$ptxas" ] && ! "$ptxas" -arch=sm_75 "$out/clang/$name.ptx" -o /dev/null 2>"$out/clang/$name.ptxas.err"; then
    echo "FAIL ptxas (clang PTX): $name"; head -5 "$out/clang/$name.ptxas.err"; fail=1
  fi
  if [ -n "$nvcc" ] && ! "$nvcc" -ptx -arch=sm_75 -Werror all-warnings "$f" -o "$out/nvcc/$name.ptx" 2>"$out/nvcc/$name.err"; then
    echo "FAIL nvcc: $name"; sed 's/^/  /' "$out/nvcc/$name.err" | head -5; fail=1
  fi
done
echo "check_compile: $count kernels files, clang-16$([ -n "$nvcc" ] && echo ", ptxas and nvcc") -> $([ $fail = 0 ] && echo OK || echo FAILED) (PTX in $out)"
exit $fail
