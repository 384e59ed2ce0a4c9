#!/usr/bin/env bash
# The merged model on several bases (docs/MACHINE_CIRCUIT.md §6, bench/merge/README.md): for each base
# and dtype, examples/dot.cu through the merged model with --check and --silence TEXT, which prints the
# silence certificate, the choice placement, the smallest margin, the choice guard and KL(base || merged)
# on text only and after the launch. Also the mute direction's width on the anisotropic base.
#
#   bash bench/merge/bases.sh [WORK_DIR]        (default /tmp/qgpu-bases; ~10 GB of checkpoints)
#
# Needs a build (build/bin) and, for the transformers-initialised base, python3 with torch and
# transformers (skipped with a note when missing). Prints figures; asserts nothing.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=$root/build/bin
work=${1:-/tmp/qgpu-bases}
mkdir -p "$work"
text="The quick brown fox jumps over the lazy dog. Gated DeltaNet layers keep a matrix of state per head."

make_config() {  # name checkpoint-dir
  sed "s|^  checkpoint: .*|  checkpoint: $2|" "$root/configs/simt_qwen2b.yaml" > "$work/$1.yaml"
}
make_config synthetic synthetic
[ -d "$work/aniso" ] || "$bin/qgpu-synth-qwen35" --out "$work/aniso" --embedding anisotropic --vocab 248320 --layers 4 >/dev/null
make_config aniso "$work/aniso"
[ -d "$work/iso" ] || "$bin/qgpu-synth-qwen35" --out "$work/iso" --embedding isotropic --vocab 248320 --layers 4 >/dev/null
make_config iso "$work/iso"
[ -d "$work/stress" ] || "$bin/qgpu-synth-qwen35" --out "$work/stress" --stress --embedding anisotropic --layers 24 >/dev/null
make_config stress "$work/stress"
bases="synthetic aniso iso stress"
if python3 -c "import torch, transformers" 2>/dev/null; then
  [ -d "$work/hf" ] || python3 "$root/bench/merge/make_hf_base.py" --out "$work/hf" --layers 2 \
    --tokenizer "$root/build/share/qgpu/synthetic-qwen35-2b/tokenizer.json" >/dev/null
  make_config hf "$work/hf"
  bases="$bases hf"
else
  echo "note: no torch/transformers: the transformers-initialised base is skipped"
fi

for w in 1 4 8 16 32 64 128; do
  echo "aniso, mute width $w: $("$bin/qgpu-host" --config "$work/aniso.yaml" info --silence --mute-width $w | tail -1)"
done
for b in $bases; do
  for dt in f32 bf16; do
    echo "== $b $dt"
    "$bin/qgpu-host" --config "$work/$b.yaml" run "$root/examples/dot.cu" --grid 1 --block 4 --arg 'a=[1,2,3]' \
      --arg 'b=[4,5,6]' --arg 'out=[0]' --arg n=3 --check --dtype $dt --silence "$text" 2>&1 |
      grep -E "model: silence|model: choice|error|model \(|out =|guard|^silence" || true
  done
done
