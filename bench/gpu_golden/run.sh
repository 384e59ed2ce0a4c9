#!/usr/bin/env bash
# Runs the kernel suite on a real NVIDIA GPU and writes golden.json (the final arrays of every
# accepted case of tests/kernels/suite.cpp, with the GPU model and CUDA versions). Needs nvcc and
# a GPU; no network, no qgpu build. Takes well under a minute on an H200.
# Environment: NVCC (compiler path), QGPU_GOLDEN_ARCH (e.g. sm_90), QGPU_GOLDEN_WORK (build dir),
# QGPU_GOLDEN_COMPILE_ONLY=1 (build only, for machines without a GPU).
#
#   bash bench/gpu_golden/run.sh [OUT_JSON]     (default: bench/gpu_golden/golden.json)
#
# The tests (tests/kernels) compare the reference and our interpreter with this file when it exists.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out_json=${1:-$root/bench/gpu_golden/golden.json}
work=${QGPU_GOLDEN_WORK:-$(mktemp -d /tmp/qgpu-golden.XXXXXX)}
mkdir -p "$work/cubin"

nvcc=${NVCC:-$(command -v nvcc || true)}
[ -n "$nvcc" ] || for d in /usr/local/cuda/bin /usr/local/cuda-*/bin; do [ -x "$d/nvcc" ] && nvcc=$d/nvcc && break; done
[ -n "$nvcc" ] && [ -x "$nvcc" ] || { echo "run.sh: error: nvcc not found (set NVCC=/path/to/nvcc)" >&2; exit 1; }
cuda_home=$(cd "$(dirname "$nvcc")/.." && pwd)
nvcc_version=$("$nvcc" --version | sed -n 's/.*\(release [0-9.]*, V[0-9.]*\).*/\1/p')

# The GPU's architecture for the cubins (PTX JIT would need a driver at least as new as nvcc).
arch=${QGPU_GOLDEN_ARCH:-}  # e.g. sm_90; default: the GPU's own
if [ -z "$arch" ] && command -v nvidia-smi >/dev/null; then
  nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv,noheader | head -1 | sed 's/^/run.sh: GPU: /'
  cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .')
  [[ "$cc" =~ ^[0-9]+$ ]] && arch=sm_$cc
fi
arch=${arch:-native}
echo "run.sh: nvcc $nvcc_version, kernels for -arch=$arch, work dir $work"

# The host program, built from the same case table as the tests (in the background meanwhile).
"$nvcc" -std=c++20 -O2 -o "$work/golden_runner" -I"$root/tests/kernels" \
  "$root/bench/gpu_golden/golden_runner.cpp" "$root/tests/kernels/suite.cpp" \
  -L"$cuda_home/lib64/stubs" -L"$cuda_home/lib64" -lcuda >"$work/golden_runner.log" 2>&1 &
runner_pid=$!

# 1. Kernels -> cubins, in parallel (files named rejected_* are for our machine's error paths only).
for f in "$root"/tests/kernels/cu/*.cu; do [[ $(basename "$f") == rejected_* ]] || printf '%s\n' "$f"; done |
  xargs -P "$(nproc)" -I{} sh -c 'f={}; n=$(basename "$f" .cu); "$0" -cubin -arch="$1" -O3 -o "$2/cubin/$n.cubin" "$f" 2>"$2/cubin/$n.log" || { echo "nvcc failed on $f:"; cat "$2/cubin/$n.log"; exit 255; }' \
  "$nvcc" "$arch" "$work"

# 2. Wait for the host program.
wait "$runner_pid" || { echo "run.sh: error: building golden_runner failed:" >&2; cat "$work/golden_runner.log" >&2; exit 1; }

# QGPU_GOLDEN_COMPILE_ONLY=1 stops here (checks the build on a machine without a GPU).
if [ "${QGPU_GOLDEN_COMPILE_ONLY:-0}" = 1 ]; then
  echo "run.sh: built $(ls "$work"/cubin/*.cubin | wc -l) cubins and $work/golden_runner (compile only)"
  exit 0
fi

# 3. Launch everything and write the golden file.
"$work/golden_runner" "$root/tests/kernels/cu" "$work/cubin" "$out_json" "$nvcc_version"
