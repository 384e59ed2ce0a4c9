#!/usr/bin/env bash
# qgpu-host build, then the same launches through the built checkpoint three ways, side by side:
# qgpu-host on the config it was built from (the merge made at start, circuit layers sparse), qgpu-host
# on the built checkpoint (its circuit layers read back sparse, and --dense: all its layers on the
# backend, as transformers runs them) and stock transformers on the built checkpoint
# (bench/build/transformers_check.py: every generated id compared). Per base and dtype it prints one
# line per launch: tokens, ms per generated token and peak memory for each runtime, and whether
# transformers' ids and arrays equal qgpu-host's.
#
#   bash bench/build/run.sh WORKDIR [BASES] [DTYPES]   # e.g. "synthetic hf" "bf16 f32"
#
# Bases: synthetic (the embedded default) and hf (Qwen3.5-2B's layer shapes, 248,320 rows, initialised
# and written by transformers: bench/merge/make_hf_base.py). A build is 6.5 GB in bf16, 13 GB in f32
# (the hf base adds 2 GB); each is removed after its launches. $PYTHON: a python3 with torch and
# transformers (PyPI), default python3.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
work=${1:?usage: run.sh WORKDIR [BASES] [DTYPES]}
bases=${2:-synthetic hf}
dtypes=${3:-bf16 f32}
python=${PYTHON:-python3}
host="$root/build/bin/qgpu-host"
mkdir -p "$work"

launch_args() {  # name -> qgpu-host run arguments
  case $1 in
    dot) echo "$root/examples/dot.cu --grid 1 --block 4 --arg a=[1,2,3] --arg b=[4,5,6] --arg out=[0] --arg n=3" ;;
    sort) echo "$root/kernels/sort.cu --grid 1 --block 4 --arg x=[3,1,2,0] --arg n=4 --arg out=[0,0,0,0]" ;;
    matmul) echo "$root/kernels/matmul.cu --grid 2 --block 2 --arg A=[1,2,3,4] --arg B=[5,6,7,8] --arg m=2 --arg k=2 \
--arg p=2 --arg C=[0,0,0,0] --arg overflow=[0]" ;;
  esac
}
per_token() {  # run --json file -> ms per generated token
  "$python" -c "import json,sys; d=json.load(open(sys.argv[1])); print(f\"{1e3*d['timings']['generate_s']/d['tokens']['generated']:.0f}\")" "$1"
}

for base in $bases; do
  case $base in
    synthetic) checkpoint=synthetic ;;
    hf) checkpoint="$work/hf"
        [ -d "$checkpoint" ] || "$python" "$root/bench/merge/make_hf_base.py" --out "$checkpoint" --layers 2 \
          --tokenizer "$root/build/share/qgpu/synthetic-qwen35-2b/tokenizer.json" >/dev/null ;;
    *) echo "unknown base $base (synthetic, hf)" >&2; exit 2 ;;
  esac
  for dtype in $dtypes; do
    source="$work/$base-$dtype.yaml" built="$work/$base-$dtype" built_config="$work/$base-$dtype-built.yaml"
    sed -e "s|^  checkpoint: .*|  checkpoint: $checkpoint|" -e "s|^  dtype: .*|  dtype: $dtype|" \
      "$root/configs/simt_qwen2b.yaml" > "$source"
    sed -e "s|^  checkpoint: .*|  checkpoint: $built|" "$source" > "$built_config"
    rm -rf "$built"
    echo "== $base, $dtype: $("$host" --config "$source" build --out "$built" --dtype "$dtype" 2>/dev/null)"
    for name in dot sort matmul; do
      # shellcheck disable=SC2046
      /usr/bin/time -f %M -o "$work/rss" "$host" --config "$source" run $(launch_args $name) --engine model \
        --dtype "$dtype" --json > "$work/$name.json" 2>/dev/null
      merged_gb=$(awk '{printf "%.1f", $1 / 1048576}' "$work/rss")
      # shellcheck disable=SC2046
      /usr/bin/time -f %M -o "$work/rss" "$host" --config "$built_config" run $(launch_args $name) --engine model \
        --dtype "$dtype" --check --json > "$work/$name-built.json" 2>/dev/null
      built_gb=$(awk '{printf "%.1f", $1 / 1048576}' "$work/rss")
      # shellcheck disable=SC2046
      /usr/bin/time -f %M -o "$work/rss" "$host" --config "$built_config" run $(launch_args $name) --engine model \
        --dtype "$dtype" --dense --json > "$work/$name-dense.json" 2>/dev/null
      dense_gb=$(awk '{printf "%.1f", $1 / 1048576}' "$work/rss")
      hf=$("$python" "$root/bench/build/transformers_check.py" --checkpoint "$built" --launch "$work/$name.json" \
        --dtype "$dtype" 2>/dev/null | tail -2 | tr '\n' ' ')
      "$python" - "$work/$name.json" "$work/$name-built.json" <<'PY'
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:3])
assert a["generated_ids"] == b["generated_ids"] and a["arrays"] == b["arrays"] and b["check"]["ok"], "built != merged"
PY
      "$python" - "$work/$name.json" "$work/$name-dense.json" <<'PY'
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:3])
assert a["generated_ids"] == b["generated_ids"] and a["arrays"] == b["arrays"], "built --dense != merged"
PY
      echo "$name: prompt $("$python" -c "import json,sys; d=json.load(open(sys.argv[1])); print(d['tokens']['prompt'], 'generated', d['tokens']['generated'])" "$work/$name.json") tokens;" \
        "qgpu-host merged (sparse) $(per_token "$work/$name.json") ms/token ($merged_gb GB), built: circuit layers" \
        "read back sparse (--check ok) $(per_token "$work/$name-built.json") ms/token ($built_gb GB), dense" \
        "$(per_token "$work/$name-dense.json") ms/token ($dense_gb GB);" \
        "transformers: $hf"
    done
    rm -rf "$built"
  done
done
