#!/usr/bin/env bash
# Writes small Qwen3.5 checkpoints for the base-model CLI tests: one good (the one
# tests/golden/make_base_golden.py runs transformers on: --small --vocab 1024 --seed 1), and
# broken copies (truncated weights, hostile header, shapes that contradict the
# config, no tokenizer, a generation_config.json with a bad eos list), each with a
# config file selecting it; and chat.yaml, the good one with the machine.
#   make_bad_checkpoints.sh SYNTH_TOOL WORK_DIR
set -euo pipefail
synth=$1 work=$2
rm -rf "$work"
mkdir -p "$work"
"$synth" --small --vocab 1024 --out "$work/good" --seed 1 >"$work/synth.log"
for name in truncated header mismatched no_tokenizer bad_generation_config; do cp -r "$work/good" "$work/$name"; done
size=$(stat -c %s "$work/good/model.safetensors")
truncate -s $((size - 1000)) "$work/truncated/model.safetensors"
# A header length of 2^40 bytes: far beyond the file.
printf '\x00\x00\x00\x00\x00\x01\x00\x00' | dd of="$work/header/model.safetensors" bs=1 seek=0 conv=notrunc status=none
sed -i 's/"intermediate_size": [0-9]*/"intermediate_size": 96/' "$work/mismatched/config.json"
rm "$work/no_tokenizer/tokenizer.json"
printf '{"do_sample": false, "eos_token_id": [5, "eos"]}\n' >"$work/bad_generation_config/generation_config.json"
for name in good truncated header mismatched no_tokenizer bad_generation_config; do
  cat >"$work/$name.yaml" <<YAML
version: 1
base:
  plugin: base_qwen35
  checkpoint: $work/$name
backend:
  plugin: backend_torch
  dtype: f32
  threads: 1
YAML
done
# The chat's tests: the machine as a tool, its launches on the circuit engine, the text on the small
# base (the circuit engine does not merge, so the base's shapes do not matter).
cat >"$work/chat.yaml" <<YAML
version: 1
frontend:
  plugin: frontend_ptx
machine:
  plugin: machine_simt
base:
  plugin: base_qwen35
  checkpoint: $work/good
backend:
  plugin: backend_torch
  dtype: f32
  threads: 1
YAML
