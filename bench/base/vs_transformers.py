#!/usr/bin/env python3
"""Text generation on one checkpoint, qgpu-host beside Hugging Face transformers, in f32 and bf16.

For each dtype it runs `qgpu-host --config C generate --prompt P --max-tokens N --no-stop --stats --json`
(C: a config with base_qwen35 on the checkpoint and backend_torch with that dtype and --threads) and
transformers' greedy generate() of N new tokens on the same prompt ids (eager attention, the torch
fallbacks, torch.set_num_threads(--threads)). Both times cover the prefill and the N-1 decode steps
that produce N tokens; tokens/s is N / that time for both. Prints one line per run, the ratios, and
whether the greedy ids agree.

  python3 bench/base/vs_transformers.py --checkpoint DIR [--host build/bin/qgpu-host] [--host before=/path/qgpu-host]

Several --host LABEL=PATH run side by side (e.g. a build before and after a change). Runs alternate
(every host, then transformers, per dtype) so that load from other jobs spreads over all of them.
Needs python3 with torch, transformers and tokenizers (PyPI).
"""
import argparse
import gc
import json
import os
import re
import subprocess
import sys
import tempfile
import time

STATS = re.compile(r"stats: prompt (\d+) tokens, generated (\d+) tokens in ([0-9.]+) s")


def run_host(host, checkpoint, dtype, threads, prompt, tokens, workdir):
    config = os.path.join(workdir, f"{dtype}.yaml")
    with open(config, "w") as f:
        f.write(f"version: 1\nbase:\n  plugin: base_qwen35\n  checkpoint: {checkpoint}\n"
                f"backend:\n  plugin: backend_torch\n  device: cpu\n  dtype: {dtype}\n  threads: {threads}\n")
    cmd = [host, "--config", config, "generate", "--prompt", prompt, "--max-tokens", str(tokens), "--no-stop",
           "--stats", "--json"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({p.returncode}): {p.stderr.strip()}")
    m = STATS.search(p.stderr)
    if not m:
        sys.exit(f"no stats line in: {p.stderr.strip()}")
    out = json.loads(p.stdout)
    return {"prompt_tokens": int(m.group(1)), "tokens": int(m.group(2)), "seconds": float(m.group(3)),
            "prompt_ids": out["prompt_ids"], "ids": out["ids"]}


def run_transformers(checkpoint, dtype, threads, prompt_ids, tokens):
    import torch
    from transformers import AutoModelForCausalLM
    torch.set_num_threads(threads)
    model = AutoModelForCausalLM.from_pretrained(
        checkpoint, dtype=torch.float32 if dtype == "f32" else torch.bfloat16, attn_implementation="eager")
    model.eval()
    with torch.no_grad():
        start = time.perf_counter()
        seq = model.generate(torch.tensor([prompt_ids]), max_new_tokens=tokens, min_new_tokens=tokens,
                             do_sample=False, eos_token_id=None, pad_token_id=0, use_cache=True)
        seconds = time.perf_counter() - start
    ids = seq[0, len(prompt_ids):].tolist()
    del model, seq
    gc.collect()
    return {"tokens": len(ids), "seconds": seconds, "ids": ids}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--host", action="append", default=[],
                    help="LABEL=PATH or PATH of a qgpu-host (repeatable; default build/bin/qgpu-host)")
    ap.add_argument("--prompt", default="The quick brown fox jumps over the lazy dog")
    ap.add_argument("--tokens", type=int, default=32)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--dtypes", default="f32,bf16")
    args = ap.parse_args()
    hosts = []
    for h in args.host or ["build/bin/qgpu-host"]:
        label, _, path = h.rpartition("=")
        hosts.append((label or "qgpu", os.path.abspath(path)))
    import torch
    import transformers
    checkpoint = os.path.abspath(args.checkpoint)
    print(f"checkpoint {checkpoint}, {args.tokens} tokens, {args.threads} threads; "
          f"transformers {transformers.__version__}, torch {torch.__version__}")
    with tempfile.TemporaryDirectory() as workdir:
        for dtype in args.dtypes.split(","):
            results = {}
            for label, path in hosts:
                results[label] = run_host(path, checkpoint, dtype, args.threads, args.prompt, args.tokens, workdir)
            prompt_ids = results[hosts[0][0]]["prompt_ids"]
            results["transformers"] = run_transformers(checkpoint, dtype, args.threads, prompt_ids, args.tokens)
            hf = results["transformers"]
            hf_rate = hf["tokens"] / hf["seconds"]
            for label, r in results.items():
                rate = r["tokens"] / r["seconds"]
                same = None
                if label != "transformers":
                    same = next((i for i, (a, b) in enumerate(zip(r["ids"], hf["ids"])) if a != b),
                                min(len(r["ids"]), len(hf["ids"])))
                agree = "" if same is None else f"  first {same}/{len(hf['ids'])} ids equal transformers'"
                print(f"{dtype:4s} {label:14s} prompt {len(prompt_ids)} tokens, {r['tokens']} tokens in "
                      f"{r['seconds']:6.2f} s = {rate:5.2f} tok/s  ({rate / hf_rate:.2f}x transformers){agree}",
                      flush=True)


if __name__ == "__main__":
    main()
