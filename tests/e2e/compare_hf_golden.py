#!/usr/bin/env python3
"""Runs `qgpu-host generate --json` on a checkpoint written by transformers (tests/golden/hf/<case>/) and
compares it with transformers' own outputs (tests/golden/make_hf_goldens.py). Standard library only: CI
runs it without PyPI.

  compare_hf_golden.py QGPU_HOST CHECKPOINT_DIR GOLDEN_JSON f32|bf16
      every prompt, greedy with --no-stop: prompt ids (our tokenizer vs `tokenizers`), the greedy ids, the
      text, the logits of the first and the last step within tolerance(), the text model's parameter count
      (a head uploaded twice or missed shows), and one warning exactly when an id without text is generated.
  compare_hf_golden.py --stops QGPU_HOST CHECKPOINT_DIR GOLDEN_JSON
      greedy (f32) without --no-stop: stops where transformers' generate() stops, on generation_config.json's
      eos ids, and on config.json's in a copy without generation_config.json; and the sampling defaults
      read from generation_config.json, which flags override.
"""
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile

# Largest |ours - transformers| over a logits row. f32: both sides compute in float32, in different
# summation orders; measured differences are <= 2.4e-6 on logits of magnitude ~1.3, so 1e-4 leaves a wide
# margin and still catches a weight mixed up (dt_bias reset to its init moves logits by 1e-2..4e-2, a
# lost norm weight by ~0.2). bf16: both sides round every layer's output to bf16 (8 significant bits),
# and one rounding step apart in an intermediate moves a logit by a few ulps; measured: up to 3.2 ulps of
# the row's largest |logit| (2.5e-2 at |logit| ~1.3, ulp 2^-7) after 12 decode steps. Allowed: 8 such
# ulps (6.25e-2 or 0.125 here): the bf16 runs catch errors of a lost norm's size; finer ones are the f32
# runs' to catch.
F32_TOLERANCE = 1e-4
BF16_ULPS = 8


def tolerance(dtype, ref):
    if dtype == "f32":
        return F32_TOLERANCE
    return BF16_ULPS * 2.0 ** (math.floor(math.log2(max(abs(v) for v in ref))) - 7)


WARNING = "which the tokenizer lacks"


def max_abs_diff(ours, ref):
    if len(ours) != len(ref):
        return float("inf")
    return max(abs(a - b) for a, b in zip(ours, ref))


def write_config(tmp, ckpt, dtype):
    config = os.path.join(tmp, f"{dtype}.yaml")
    with open(config, "w") as f:
        f.write(f"version: 1\nbase:\n  plugin: base_qwen35\n  checkpoint: {ckpt}\n"
                f"backend:\n  plugin: backend_torch\n  dtype: {dtype}\n  threads: 1\n")
    return config


def generate(host, config, prompt, *flags):
    run = subprocess.run([host, "--config", config, "generate", "--prompt", prompt, "--json", *flags],
                         capture_output=True, text=True)
    if run.returncode != 0:
        return None, f"exit {run.returncode}: {run.stderr.strip()}"
    return json.loads(run.stdout), run.stderr


def report(name, checks, detail=""):
    bad = [what for what, ok in checks.items() if not ok]
    print(f"{'FAIL' if bad else 'ok  '} {name}{detail}" + (f"; failed: {', '.join(bad)}" if bad else ""))
    return 1 if bad else 0


def parity(host, ckpt, golden, dtype):
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        config = write_config(tmp, ckpt, dtype)
        for case in (c for c in golden["runs"] if c["dtype"] == dtype):
            # --temperature 0: greedy even where generation_config.json asks for sampling.
            ours, stderr = generate(host, config, case["prompt"], "--max-tokens", str(golden["new_tokens"]),
                                    "--logits", "--no-stop", "--temperature", "0")
            name = f"{golden['case']} {dtype} {case['prompt']!r}"
            if ours is None:
                print(f"FAIL {name}: {stderr}")
                failures += 1
                continue
            first = max_abs_diff(ours["logits"][0], case["logits_first"])
            last = max_abs_diff(ours["logits"][-1], case["logits_last"])
            first_tol = tolerance(dtype, case["logits_first"])
            last_tol = tolerance(dtype, case["logits_last"])
            textless = any(i >= golden["tokenizer_size"] for i in case["ids"])
            checks = {
                "prompt ids": ours["prompt_ids"] == case["prompt_ids"],
                "greedy ids": ours["ids"] == case["ids"],
                "text": ours["text"] == case["text"],
                "not stopped": not ours["stopped"] and ours["stop_ids"] == [],
                f"first-step logits within {first_tol:.2e}": first <= first_tol,
                f"last-step logits within {last_tol:.2e}": last <= last_tol,
                "parameters": ours["model"]["parameters"] == golden["parameters"],
                "tokenizer size": ours["model"]["tokenizer_size"] == golden["tokenizer_size"],
                "one warning per id without text": stderr.count(WARNING) == (1 if textless else 0),
            }
            failures += report(name, checks, f": first-step max diff {first:.2e} (allowed {first_tol:.2e}), "
                               f"last-step {last:.2e} (allowed {last_tol:.2e})"
                               + (" (ids without text generated)" if textless else ""))
            if ours["ids"] != case["ids"]:
                print(f"  ours ids {ours['ids']}\n  ref  ids {case['ids']}")
    return failures


def stops(host, ckpt, golden):
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        bare = os.path.join(tmp, "no_generation_config")
        shutil.copytree(ckpt, bare)
        os.remove(os.path.join(bare, "generation_config.json"))
        for run in golden["stop_runs"]:
            path = ckpt if run["eos_from"] == "generation_config.json" else bare
            config = write_config(tmp, path, "f32")
            ours, stderr = generate(host, config, run["prompt"], "--max-tokens", str(run["max_new_tokens"]),
                                    "--temperature", "0")
            name = f"{golden['case']} stops on {run['eos_from']}'s eos {run['eos_token_ids']}"
            if ours is None:
                print(f"FAIL {name}: {stderr}")
                failures += 1
                continue
            # transformers keeps the eos id at the end of the sequence; we stop before it.
            checks = {
                "stop ids": ours["stop_ids"] == run["eos_token_ids"],
                "stopped": ours["stopped"] == run["stopped"],
                "ids up to the eos": ours["ids"] + [run["ids"][-1]] == run["ids"],
            }
            failures += report(name, checks, f": {len(ours['ids'])} ids, then eos {run['ids'][-1]}")
        # Sampling defaults from generation_config.json (as transformers reads it), then a flag over them.
        g = golden["generation"]
        config = write_config(tmp, ckpt, "f32")
        ours, stderr = generate(host, config, "Hello", "--max-tokens", "1", "--seed", "5")
        if ours is None:
            print(f"FAIL sampling defaults: {stderr}")
            return failures + 1
        s = ours["sampling"]
        failures += report(f"{golden['case']} sampling defaults {g}", {
            "do_sample": (s["temperature"] > 0) == g["do_sample"],
            "temperature": s["temperature"] == g["temperature"],
            "top_k": s["top_k"] == g["top_k"],
            "top_p": s["top_p"] == g["top_p"],
            "source": s["defaults_from"].endswith("generation_config.json"),
        })
        ours, stderr = generate(host, config, "Hello", "--max-tokens", "1", "--top-k", "5")
        if ours is None:
            print(f"FAIL sampling flags: {stderr}")
            return failures + 1
        s = ours["sampling"]
        failures += report(f"{golden['case']} --top-k 5 over the defaults", {
            "top_k": s["top_k"] == 5,
            "temperature kept": s["temperature"] == g["temperature"],
            "top_p kept": s["top_p"] == g["top_p"],
        })
    return failures


def main():
    args = sys.argv[1:]
    if args and args[0] == "--stops":
        host, ckpt, golden_path = args[1:4]
        dtype = None
    else:
        host, ckpt, golden_path, dtype = args[0:4]
    with open(golden_path) as f:
        golden = json.load(f)
    ckpt = os.path.abspath(ckpt)
    failures = stops(host, ckpt, golden) if dtype is None else parity(host, ckpt, golden, dtype)
    print(f"{'FAIL' if failures else 'ok'}: {failures} check(s) differ from transformers "
          f"{golden['versions']['transformers']} on {golden['case']}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
