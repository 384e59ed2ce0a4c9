#!/usr/bin/env bash
# Installs every build and test dependency of qgpu from Debian's archive.
# Idempotent: packages already present are left as they are.
set -euo pipefail

packages=(
  # build tools
  cmake ninja-build g++ pkg-config ccache
  # core
  libboost-dev libboost-filesystem-dev libyaml-cpp-dev libspdlog-dev libfmt-dev libcli11-dev
  nlohmann-json3-dev
  # tests
  libgtest-dev libgmock-dev llvm-16-tools libclang-rt-16-dev
  # frontend_ptx: clang-16 (CUDA -> PTX), MLIR 16
  clang-16 libclang-16-dev llvm-16-dev libmlir-16-dev mlir-16-tools
  # base_qwen35 tokenizer: ICU (Unicode classes, NFC); liblzma for the compressed test tokenizers
  libicu-dev liblzma-dev
  # backend_torch: LibTorch + a fast BLAS for fp32
  libtorch-dev libopenblas0-openmp
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#packages[@]} packages already installed"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "install-deps: installing ${#missing[@]} packages: ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install-deps: done"
