#!/usr/bin/env python3
"""Runs `qgpu-host generate --json --logits` on a checkpoint and compares it with transformers' goldens
(tests/golden/make_base_golden.py): prompt token ids (our tokenizer vs `tokenizers`), greedy ids, and the
logits of the prefill and of the last decode step. Standard library only: CI runs it without PyPI.

  compare_generation.py QGPU_HOST CHECKPOINT_DIR GOLDEN_JSON DTYPE
"""
import json
import os
import subprocess
import sys
import tempfile

TOLERANCE = {"f32": 1e-4, "bf16": 3e-2}  # max |ours - ref| / max |ref| per logits row


def rel_diff(ours, ref):
    scale = max(abs(v) for v in ref)
    return max(abs(a - b) for a, b in zip(ours, ref)) / scale


def argmax(values):
    return max(range(len(values)), key=lambda i: (values[i], -i))


def main():
    host, ckpt, golden_path, dtype = sys.argv[1:5]
    ckpt = os.path.abspath(ckpt)
    with open(golden_path) as f:
        golden = json.load(f)
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        config = os.path.join(tmp, "c.yaml")
        with open(config, "w") as f:
            f.write(f"version: 1\nbase:\n  plugin: base_qwen35\n  checkpoint: {ckpt}\n"
                    f"backend:\n  plugin: backend_torch\n  dtype: {dtype}\n  threads: 1\n")
        for case in (c for c in golden["cases"] if c["dtype"] == dtype):
            # --no-stop: the goldens were generated without eos (transformers' eos_token_id=None).
            run = subprocess.run([host, "--config", config, "generate", "--prompt", case["prompt"], "--max-tokens",
                                  str(golden["new_tokens"]), "--json", "--logits", "--no-stop"],
                                 capture_output=True, text=True)
            if run.returncode != 0:
                print(f"FAIL {case['prompt']!r}: exit {run.returncode}: {run.stderr.strip()}")
                failures += 1
                continue
            ours = json.loads(run.stdout)
            first = rel_diff(ours["logits"][0], case["logits_first"])
            last = rel_diff(ours["logits"][-1], case["logits_last"])
            checks = {
                "prompt ids": ours["prompt_ids"] == case["prompt_ids"],
                "greedy ids": ours["ids"] == case["ids"],
                "prefill argmax": argmax(ours["logits"][0]) == argmax(case["logits_first"]),
                "last-step argmax": argmax(ours["logits"][-1]) == argmax(case["logits_last"]),
                f"prefill logits within {TOLERANCE[dtype]}": first <= TOLERANCE[dtype],
                f"last-step logits within {TOLERANCE[dtype]}": last <= TOLERANCE[dtype],
            }
            bad = [name for name, ok in checks.items() if not ok]
            print(f"{'FAIL' if bad else 'ok  '} {dtype} {case['prompt']!r}: prefill rel diff {first:.2e}, "
                  f"last-step rel diff {last:.2e}" + (f"; failed: {', '.join(bad)}" if bad else ""))
            if bad:
                print(f"  ours ids {ours['ids']}\n  ref  ids {case['ids']}")
                failures += 1
    print(f"{'FAIL' if failures else 'ok'}: {failures} of the {dtype} cases differ from transformers "
          f"{golden['versions']['transformers']}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
