#!/usr/bin/env python3
"""Golden greedy generations of Hugging Face transformers on our synthetic Qwen3.5 checkpoint.

The checkpoint is written by our own deterministic generator (qgpu-synth-qwen35 --small --vocab 1024
--seed 1), so only the reference's outputs need committing. transformers loads it as published
checkpoints are loaded (config.json with text_config, model.language_model.* weights) and generates
greedily in float32 and bfloat16 with eager attention; `tokenizers` encodes the prompts with the
checkpoint's tokenizer.json. The test (tests/CMakeLists.txt, cli.base_matches_transformers_*) runs
`qgpu-host generate --json` on the same checkpoint and compares the token ids.

Regenerate (needs a venv with torch, transformers, tokenizers from PyPI; no fla/causal-conv1d):
    /work/venv-torch/bin/python tests/golden/make_base_golden.py build/bin/qgpu-synth-qwen35
"""
import json
import os
import subprocess
import sys
import tempfile

import tokenizers
import torch
import transformers
from transformers import AutoModelForCausalLM

PROMPTS = ["Hello", "The quick brown fox", "def add(a, b):\n    return"]
NEW_TOKENS = 12


def main():
    synth = sys.argv[1]
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "synthetic_small_greedy.json")
    with tempfile.TemporaryDirectory() as tmp:
        ckpt = os.path.join(tmp, "ckpt")
        subprocess.run([synth, "--small", "--vocab", "1024", "--seed", "1", "--out", ckpt], check=True,
                       stdout=subprocess.DEVNULL)
        tok = tokenizers.Tokenizer.from_file(os.path.join(ckpt, "tokenizer.json"))
        result = {"generator": "qgpu-synth-qwen35 --small --vocab 1024 --seed 1",
                  "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                               "tokenizers": tokenizers.__version__},
                  "new_tokens": NEW_TOKENS, "cases": []}
        for dtype_name, dtype in [("f32", torch.float32), ("bf16", torch.bfloat16)]:
            model = AutoModelForCausalLM.from_pretrained(ckpt, dtype=dtype, attn_implementation="eager")
            model.eval()
            for prompt in PROMPTS:
                ids = tok.encode(prompt).ids
                with torch.no_grad():
                    gen = model.generate(torch.tensor([ids]), max_new_tokens=NEW_TOKENS, do_sample=False,
                                         eos_token_id=None, pad_token_id=0, use_cache=True,
                                         output_logits=True, return_dict_in_generate=True)
                new = gen.sequences[0, len(ids):].tolist()
                # Logits of the prefill (chunked delta rule) and of the last decode step (recurrence),
                # as float32 values (bf16 logits are exact in float32).
                first = gen.logits[0][0].float().tolist()
                last = gen.logits[-1][0].float().tolist()
                result["cases"].append({"dtype": dtype_name, "prompt": prompt, "prompt_ids": ids, "ids": new,
                                        "logits_first": first, "logits_last": last})
                print(dtype_name, repr(prompt), ids, new)
    with open(out, "w") as f:
        json.dump(result, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
