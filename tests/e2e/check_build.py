#!/usr/bin/env python3
"""qgpu-host build, end to end (docs/BUILD.md), against a golden written by stock transformers.

  check_build.py GOLDEN SOURCE_CHECKPOINT WORKDIR -- HOST --config CONFIG

1. `build --dtype bf16` of CONFIG into WORKDIR/built; the files: config.json (layers, layer_types,
   vocabulary, untied head, dtype), the safetensors (every base tensor bit for bit under its new
   layer index, the base's embedding and head rows bit for bit, circuit layers of stock names,
   shapes and dtypes), tokenizer.json (record tokens as special added tokens at their ids, with no
   gap), qgpu.json.
2. The dot launch of GOLDEN (tests/golden/build, what transformers generated on a checkpoint built
   from this config and the arrays it read from its own state with run --json's readout,
   bench/build/transformers_check.py): the same arrays and ids from run --engine model on
   CONFIG, from run --engine model --check on the built checkpoint (its circuit layers read back
   sparse, and --dense; arrays read from its own state), and from plain `generate --prompt-ids` on
   the built checkpoint (no machine at all).
3. Refusals: building into a directory that holds a checkpoint; running it in another dtype.
The safetensors are read with the standard library only (the header is JSON).
"""
import hashlib
import json
import os
import shutil
import struct
import subprocess
import sys

DOT = ["run", None, "--grid", "1", "--block", "4", "--arg", "a=[1,2,3]", "--arg", "b=[4,5,6]",
       "--arg", "out=[0]", "--arg", "n=3", "--engine", "model", "--dtype", "bf16", "--json"]


def fail(message):
    sys.exit(f"check_build: {message}")


def run(cmd, expect=0):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != expect:
        fail(f"{' '.join(cmd)} exited {p.returncode} (expected {expect}): {p.stderr.strip()[-2000:]}")
    return p


class Store:
    """Every tensor of a checkpoint directory: name -> (file, dtype, shape, begin, end) absolute offsets."""

    def __init__(self, directory):
        self.tensors = {}
        index = os.path.join(directory, "model.safetensors.index.json")
        files = sorted(set(json.load(open(index))["weight_map"].values())) if os.path.exists(index) \
            else ["model.safetensors"]
        for name in files:
            path = os.path.join(directory, name)
            with open(path, "rb") as f:
                n = struct.unpack("<Q", f.read(8))[0]
                header = json.loads(f.read(n))
            for key, t in header.items():
                if key != "__metadata__":
                    b, e = t["data_offsets"]
                    self.tensors[key] = (path, t["dtype"], t["shape"], 8 + n + b, 8 + n + e)

    def digest(self, name, first=None, last=None):
        path, _, _, b, e = self.tensors[name]
        if first is not None:
            b, e = b + first, b + last
        h = hashlib.sha256()
        with open(path, "rb") as f:
            f.seek(b)
            left = e - b
            while left:
                chunk = f.read(min(left, 1 << 24))
                h.update(chunk)
                left -= len(chunk)
        return h.hexdigest()


def text_config(config):
    return config["text_config"] if "text_config" in config else config


def check_files(built, source_dir, result):
    n, base_layers = result["circuit_layers"], result["base_layers"]
    v, r = result["text_rows"], result["record_rows"]
    config = json.load(open(os.path.join(built, "config.json")))
    text = text_config(config)
    source_text = text_config(json.load(open(os.path.join(source_dir, "config.json"))))
    if text["num_hidden_layers"] != n + base_layers:
        fail(f"config.json: num_hidden_layers {text['num_hidden_layers']}, expected {n + base_layers}")
    types = text["layer_types"]
    if types[:n] != ["linear_attention"] * n or len(types) != n + base_layers:
        fail(f"config.json: layer_types do not start with {n} linear_attention layers")
    if "layer_types" in source_text and types[n:] != source_text["layer_types"]:
        fail("config.json: the base's layer_types are not kept after the circuit's")
    if text["vocab_size"] != v + r or text["tie_word_embeddings"] is not False:
        fail(f"config.json: vocab_size {text['vocab_size']} (expected {v + r}), tie {text['tie_word_embeddings']}")
    if text.get("dtype", config.get("dtype")) != "bfloat16":
        fail("config.json: dtype is not bfloat16")

    src, out = Store(source_dir), Store(built)
    prefix = "model.language_model." if "model.language_model.embed_tokens.weight" in src.tensors else "model."
    compared = 0
    for name, (_, dtype, shape, b, e) in src.tensors.items():
        target = name
        if name.startswith(prefix + "layers."):
            rest = name[len(prefix + "layers."):]
            index, suffix = rest.split(".", 1)
            target = f"{prefix}layers.{int(index) + n}.{suffix}"
        if name in (prefix + "embed_tokens.weight", "lm_head.weight"):
            continue
        if target not in out.tensors:
            fail(f"{target} (the base's {name}) is missing")
        if out.tensors[target][1:3] != (dtype, shape) or out.digest(target) != src.digest(name):
            fail(f"{target} is not the base's {name} bit for bit")
        compared += 1
    # The embedding (and the tied head) keep the base's rows first, then the record rows.
    embed = prefix + "embed_tokens.weight"
    rows = src.tensors[embed][4] - src.tensors[embed][3]
    for name in (embed, "lm_head.weight"):
        _, dtype, shape, _, _ = out.tensors[name]
        if shape != [v + r, shape[1]] or dtype != src.tensors[embed][1]:
            fail(f"{name}: {dtype} {shape}, expected {src.tensors[embed][1]} [{v + r}, ...]")
        source_name = name if name in src.tensors else embed
        if out.digest(name, 0, rows) != src.digest(source_name):
            fail(f"{name}: the base's {v} rows are not kept bit for bit")
    # Circuit layers: stock names, shapes and dtypes (A_log and the gated norm in F32).
    layer0 = {k[len(prefix + "layers.0."):]: t for k, t in out.tensors.items() if k.startswith(prefix + "layers.0.")}
    if len(layer0) != 14:
        fail(f"circuit layer 0 has {len(layer0)} tensors, a linear-attention layer 14")
    for suffix, (_, dtype, shape, _, _) in layer0.items():
        want = "F32" if suffix in ("linear_attn.A_log", "linear_attn.norm.weight") else "BF16"
        if dtype != want:
            fail(f"circuit layer 0 {suffix}: {dtype}, expected {want}")
    if out.tensors[prefix + "layers.0.mlp.gate_proj.weight"][2] != src.tensors[prefix + "layers.0.mlp.gate_proj.weight"][2]:
        fail("circuit layer 0 mlp.gate_proj has not the base's shape")

    tokenizer = json.load(open(os.path.join(built, "tokenizer.json")))
    added = {t["id"]: t for t in tokenizer["added_tokens"]}
    top = max(list(tokenizer["model"]["vocab"].values()) + list(added))
    if top != v + r - 1 or any(i not in added and i not in tokenizer["model"]["vocab"].values()
                               for i in range(v - 1, v + r)):
        fail(f"tokenizer.json: ids do not run without a gap up to {v + r - 1} (largest {top})")
    if added[v]["content"] != "<|qgpu:HALT|>" or not all(added[i]["special"] for i in range(v, v + r)):
        fail(f"tokenizer.json: id {v} is {added[v]['content']!r}; record tokens must be special")
    manifest = json.load(open(os.path.join(built, "qgpu.json")))
    if manifest["format"] != "qgpu-build" or manifest["circuit"]["layers"] != n or manifest["records"]["first_id"] != v:
        fail("qgpu.json does not describe the build")
    return compared


def main():
    args = sys.argv[1:]
    if len(args) < 6 or args[3] != "--":
        fail("usage: check_build.py GOLDEN SOURCE_CHECKPOINT WORKDIR -- HOST --config CONFIG")
    golden = json.load(open(args[0]))
    source_dir, workdir, host = args[1], args[2], args[4:]
    config_file = host[host.index("--config") + 1]
    dot = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                       "examples", "dot.cu")
    DOT[1] = dot
    built = os.path.join(workdir, "built")
    shutil.rmtree(built, ignore_errors=True)
    os.makedirs(workdir, exist_ok=True)
    try:
        result = json.loads(run(host + ["build", "--out", built, "--dtype", "bf16", "--json"]).stdout)
        compared = check_files(built, source_dir, result)

        source_run = json.loads(run(host + DOT).stdout)
        if golden["arrays"] != source_run["arrays"]:
            fail(f"transformers' golden read {golden['arrays']} from its own state, qgpu-host {source_run['arrays']}")
        if sorted(source_run["readout"]) != sorted(source_run["arrays"]) or \
                any(len(source_run["readout"][k]) != len(v) for k, v in source_run["arrays"].items()):
            fail(f"run --json's readout does not locate every array element: {source_run['readout']}")
        if source_run["prompt_ids"] != golden["prompt_ids"] or source_run["generated_ids"] != golden["generated_ids"]:
            fail(f"run on {config_file}: ids differ from transformers' golden (generated "
                 f"{source_run['generated_ids']}, golden {golden['generated_ids']}; regenerate it with "
                 "bench/build/transformers_check.py if the circuit changed on purpose)")

        built_config = os.path.join(workdir, "built.yaml")
        with open(config_file) as f:
            text = f.read()
        if "checkpoint: synthetic" not in text or "dtype: f32" not in text:
            fail(f"{config_file}: expected 'checkpoint: synthetic' and 'dtype: f32' to replace")
        with open(built_config, "w") as f:
            f.write(text.replace("checkpoint: synthetic", f"checkpoint: {built}").replace("dtype: f32", "dtype: bf16"))
        built_host = [host[0], "--config", built_config]
        for path in ([], ["--dense"]):  # circuit layers read back sparse (the default), or dense
            built_run = json.loads(run(built_host + DOT + ["--check"] + path).stdout)
            if built_run["generated_ids"] != golden["generated_ids"] or built_run["arrays"]["out"] != [32] or \
                    not built_run["check"]["ok"]:
                fail(f"run {' '.join(path)} on the built checkpoint: {built_run['generated_ids']}, "
                     f"out {built_run['arrays']['out']}")

        ids = os.path.join(workdir, "prompt_ids.json")
        with open(ids, "w") as f:
            json.dump(golden["prompt_ids"], f)
        plain = run(built_host + ["generate", "--prompt-ids", "@" + ids, "--max-tokens",
                                  str(len(golden["generated_ids"])), "--no-stop", "--no-suppress", "--json"])
        generated = json.loads(plain.stdout.strip().splitlines()[-1])["ids"]
        if generated != golden["generated_ids"]:
            fail(f"generate on the built checkpoint (no machine): {generated}, golden {golden['generated_ids']}")

        # Text on it never chooses a record token (generation_config.json's suppress_tokens).
        text = json.loads(run(built_host + ["generate", "--prompt-ids", "@" + ids, "--max-tokens", "3", "--no-stop",
                                            "--json"]).stdout.strip().splitlines()[-1])
        if text["suppressed"] != result["record_rows"] or any(i >= result["text_rows"] for i in text["ids"]):
            fail(f"generate on the built checkpoint without --no-suppress: {text['ids']}, suppressed "
                 f"{text['suppressed']}")
        again = run(host + ["build", "--out", built], expect=2)
        if "already holds a checkpoint" not in again.stderr:
            fail(f"building over a checkpoint: {again.stderr.strip()}")
        f32 = DOT[:-2] + ["f32", "--json"]
        wrong = run(built_host + f32, expect=2)
        if "was built for bf16" not in wrong.stderr:
            fail(f"running the bf16 build in f32: {wrong.stderr.strip()}")
    finally:
        shutil.rmtree(built, ignore_errors=True)
    print(f"check_build: {compared} base tensors bit for bit; {len(golden['generated_ids'])} generated ids equal "
          f"transformers' (source config, built checkpoint with and without the machine); refusals ok")


if __name__ == "__main__":
    main()
