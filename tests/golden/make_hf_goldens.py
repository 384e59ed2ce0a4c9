#!/usr/bin/env python3
"""Tiny Qwen3.5 checkpoints written by Hugging Face transformers itself, and transformers' outputs on them.

Unlike make_base_golden.py (our own writer, transformers only reading), here transformers builds each
model from a config (`AutoConfig.for_model`, `Qwen3_5ForConditionalGeneration` or `Qwen3_5ForCausalLM`,
random init from a fixed seed, the 1-D weights — norms, dt_bias — then perturbed so that they matter) and
writes it with `save_pretrained`. The cases cover what published checkpoints vary in:

  wrapper_vision  Qwen3_5ForConditionalGeneration with a tiny vision tower (model.visual.*, ignored by
                  the text model) and mtp.* tensors added afterwards (ignored by transformers on load);
                  untied lm_head.weight; bf16; 5 shards + model.safetensors.index.json (max_shard_size);
                  layer_types (L, F, L, L, F), off the (L, L, L, F) interval; 4 value heads over 2 key
                  heads, value head dim 24 != key head dim 16; a generation_config.json with its own eos
                  list (different from config.json's eos) and sampling defaults (do_sample, temperature,
                  top_k, top_p).
  causal_untied   Qwen3_5ForCausalLM (text-only model.* names), untied lm_head.weight, f32, one file;
                  6 value heads over 2 key heads, dims 16 / 8; 1 KV head; partial_rotary_factor 0.5, no
                  mrope_section; 384 embedding rows for the tokenizer's 289 ids (so padding rows can win).
  causal_tied     Qwen3_5ForCausalLM, tied head (no lm_head.weight), bf16, layer_types (L, F, L).

The tokenizer is our synthetic one (`qgpu-synth-qwen35 --small --tokenizer-vocab 256`: 256 BPE tokens +
33 added = 289 ids); `tokenizers` encodes the prompts. For each case and dtype (float32, bfloat16;
eager attention, no fla/causal-conv1d) it records, in tests/golden/hf/<case>.golden.json:
  - per prompt: prompt ids, greedy ids (`generate(do_sample=False, eos_token_id=None)`: no stopping),
    the logits of the first step (prefill) and of the last, their text (`tokenizers` decode);
  - the text model's parameter count (vision and mtp excluded, a tied head once);
  - the generation defaults transformers reads from the directory (GenerationConfig.from_pretrained);
  - stop runs: greedy generation with the eos ids transformers uses by default — from
    generation_config.json, and from config.json when the directory has no generation_config.json.
The eos ids of wrapper_vision are chosen from its own no-stop greedy run, so that both stop runs end
early at different steps. The test (tests/CMakeLists.txt, cli.hf_golden_*, tests/e2e/compare_hf_golden.py)
runs `qgpu-host generate --json --no-stop` on the committed checkpoints and compares.

Regenerate (Python with torch, transformers, safetensors, tokenizers from PyPI; no fla/causal-conv1d):
    python3 tests/golden/make_hf_goldens.py build/bin/qgpu-synth-qwen35
It rewrites tests/golden/hf/ completely; versions used are recorded in each golden file.
"""
import copy
import json
import os
import shutil
import subprocess
import sys
import tempfile

import safetensors
import safetensors.torch
import tokenizers
import torch
import transformers
from transformers import AutoConfig, GenerationConfig, Qwen3_5ForCausalLM, Qwen3_5ForConditionalGeneration

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "hf")
PROMPTS = ["Hello", "The quick brown fox", "def add(a, b):\n    return"]
NEW_TOKENS = 12
STOP_TOKENS = 16  # max_new_tokens of the stop runs
TOKENIZER_VOCAB = 256  # BPE tokens; ids 256..288 are the 33 added tokens (256 <|endoftext|>, 258 <|im_end|>)
TOKENIZER_IDS = TOKENIZER_VOCAB + 33

CASES = [
    {
        "name": "wrapper_vision",
        "class": "Qwen3_5ForConditionalGeneration",
        "seed": 11,
        "dtype": torch.bfloat16,
        "max_shard_size": "150KB",
        "mtp": True,
        "text": dict(vocab_size=320, hidden_size=64, intermediate_size=128, num_hidden_layers=5,
                     num_attention_heads=4, num_key_value_heads=2, head_dim=32,
                     linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=16,
                     linear_value_head_dim=24, linear_conv_kernel_dim=4, initializer_range=0.05,
                     layer_types=["linear_attention", "full_attention", "linear_attention", "linear_attention",
                                  "full_attention"],
                     rope_parameters={"rope_type": "default", "rope_theta": 1e7, "partial_rotary_factor": 0.25,
                                      "mrope_section": [2, 1, 1], "mrope_interleaved": True},
                     tie_word_embeddings=False),
        "vision": dict(depth=1, hidden_size=32, intermediate_size=64, num_heads=2, patch_size=4,
                       temporal_patch_size=2, spatial_merge_size=2, out_hidden_size=64, num_position_embeddings=16),
        # eos ids chosen from the case's own greedy run (choose_eos); sampling defaults as Qwen publishes them.
        "generation": {"do_sample": True, "temperature": 0.6, "top_k": 20, "top_p": 0.95},
        "choose_eos": True,
    },
    {
        "name": "causal_untied",
        "class": "Qwen3_5ForCausalLM",
        "seed": 12,
        "dtype": torch.float32,
        "max_shard_size": None,
        "mtp": False,
        "text": dict(vocab_size=384, hidden_size=64, intermediate_size=96, num_hidden_layers=4,
                     num_attention_heads=2, num_key_value_heads=1, head_dim=16,
                     linear_num_key_heads=2, linear_num_value_heads=6, linear_key_head_dim=8,
                     linear_value_head_dim=16, linear_conv_kernel_dim=4, initializer_range=0.05,
                     rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5},
                     eos_token_id=TOKENIZER_VOCAB, tie_word_embeddings=False),
        "generation": None,  # the generation_config.json save_pretrained writes (eos from config.json)
        "choose_eos": False,
    },
    {
        "name": "causal_tied",
        "class": "Qwen3_5ForCausalLM",
        "seed": 13,
        "dtype": torch.bfloat16,
        "max_shard_size": None,
        "mtp": False,
        "text": dict(vocab_size=300, hidden_size=64, intermediate_size=128, num_hidden_layers=3,
                     num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                     linear_num_key_heads=2, linear_num_value_heads=2, linear_key_head_dim=16,
                     linear_value_head_dim=16, linear_conv_kernel_dim=4, initializer_range=0.05,
                     layer_types=["linear_attention", "full_attention", "linear_attention"],
                     rope_parameters={"rope_type": "default", "rope_theta": 1e6, "partial_rotary_factor": 0.25,
                                      "mrope_section": [1, 1, 0], "mrope_interleaved": True},
                     eos_token_id=[TOKENIZER_VOCAB, TOKENIZER_VOCAB + 2], tie_word_embeddings=True),
        "generation": None,
        "choose_eos": False,
    },
]


def model_class(case):
    return {"Qwen3_5ForConditionalGeneration": Qwen3_5ForConditionalGeneration,
            "Qwen3_5ForCausalLM": Qwen3_5ForCausalLM}[case["class"]]


def build(case):
    """The model from its config, random init (seeded), 1-D weights perturbed."""
    if case["class"] == "Qwen3_5ForConditionalGeneration":
        config = AutoConfig.for_model("qwen3_5", text_config=case["text"], vision_config=case["vision"],
                                      tie_word_embeddings=case["text"]["tie_word_embeddings"],
                                      image_token_id=TOKENIZER_VOCAB + 24, video_token_id=TOKENIZER_VOCAB + 25,
                                      vision_start_token_id=TOKENIZER_VOCAB + 21,
                                      vision_end_token_id=TOKENIZER_VOCAB + 22)
    else:
        config = AutoConfig.for_model("qwen3_5_text", **case["text"])
    torch.manual_seed(case["seed"])
    model = model_class(case)(config)
    # transformers initialises norms to 0 (scale 1 + w), the gated norm to 1 and dt_bias to 1: perturb
    # every 1-D weight so that a mix-up between them shows in the outputs.
    gen = torch.Generator().manual_seed(case["seed"] + 1000)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1 and not name.endswith("A_log"):
                p.add_(torch.randn(p.shape, generator=gen) * 0.2)
    return model.to(case["dtype"])


def add_mtp_tensors(ckpt, hidden):
    """Published checkpoints carry a multi-token-prediction head (mtp.*) that transformers drops on
    load; append a few such tensors to the last shard and the index."""
    index_path = os.path.join(ckpt, "model.safetensors.index.json")
    with open(index_path) as f:
        index = json.load(f)
    last = sorted(set(index["weight_map"].values()))[-1]
    path = os.path.join(ckpt, last)
    tensors = safetensors.torch.load_file(path)
    gen = torch.Generator().manual_seed(7)
    extra = {"mtp.fc.weight": torch.randn(hidden, 2 * hidden, generator=gen).to(torch.bfloat16),
             "mtp.norm.weight": torch.randn(hidden, generator=gen).to(torch.bfloat16),
             "mtp.layers.0.mlp.up_proj.weight": torch.randn(8, hidden, generator=gen).to(torch.bfloat16)}
    tensors.update(extra)
    safetensors.torch.save_file(tensors, path, metadata={"format": "pt"})
    for name, t in extra.items():
        index["weight_map"][name] = last
        index["metadata"]["total_size"] += t.numel() * t.element_size()
    index["weight_map"] = dict(sorted(index["weight_map"].items()))
    with open(index_path, "w") as f:
        json.dump(index, f, indent=2, sort_keys=True)
        f.write("\n")


def load(case, ckpt, dtype):
    model = model_class(case).from_pretrained(ckpt, dtype=dtype, attn_implementation="eager")
    model.eval()
    return model


def greedy(model, ids, max_new_tokens, **kwargs):
    with torch.no_grad():
        return model.generate(torch.tensor([ids]), max_new_tokens=max_new_tokens, do_sample=False, pad_token_id=0,
                              use_cache=True, output_logits=True, return_dict_in_generate=True, **kwargs)


def f32_list(t):
    return [float(f"{v:.9g}") for v in t.float().tolist()]  # 9 digits: every float32 exactly


def text_parameters(model):
    return sum(p.numel() for n, p in model.named_parameters() if not n.startswith("model.visual."))


def choose_eos(case, ckpt, tok):
    """From the f32 no-stop greedy runs: a prompt whose run has ids first appearing at steps 1 <= j < k;
    generation_config.json stops at j (its list also holds <|im_end|>, never generated first), config.json's
    eos at k."""
    model = load(case, ckpt, torch.float32)
    for prompt in PROMPTS:
        ids = tok.encode(prompt).ids
        new = greedy(model, ids, STOP_TOKENS, eos_token_id=None).sequences[0, len(ids):].tolist()
        firsts = [i for i in range(1, len(new)) if new[i] not in new[:i] and new[i] != TOKENIZER_VOCAB + 2]
        if len(firsts) >= 3:
            j, k = firsts[0], firsts[1]  # k before the last step, so the stop shows
            return prompt, [TOKENIZER_VOCAB + 2, new[j]], new[k]
    raise SystemExit(f"{case['name']}: no prompt has two new ids after step 0; change the seed")


def stop_runs(case, ckpt, tok, prompt):
    """Greedy with transformers' default eos ids: from generation_config.json, then without that file."""
    runs = []
    ids = tok.encode(prompt).ids
    with tempfile.TemporaryDirectory() as tmp:
        bare = os.path.join(tmp, "no_generation_config")
        shutil.copytree(ckpt, bare)
        os.remove(os.path.join(bare, "generation_config.json"))
        for variant, path in [("generation_config.json", ckpt), ("config.json", bare)]:
            model = load(case, path, torch.float32)
            eos = model.generation_config.eos_token_id
            eos = [eos] if isinstance(eos, int) else list(eos)
            new = greedy(model, ids, STOP_TOKENS).sequences[0, len(ids):].tolist()
            stopped = new[-1] in eos
            assert stopped and len(new) < STOP_TOKENS, (variant, new, eos)
            runs.append({"eos_from": variant, "eos_token_ids": eos, "prompt": prompt, "prompt_ids": ids,
                         "max_new_tokens": STOP_TOKENS, "ids": new, "stopped": stopped})
            print(case["name"], "stop run, eos from", variant, eos, new)
    assert runs[0]["ids"] != runs[1]["ids"], "the two stop runs must end at different steps"
    return runs


def make_case(case, tokenizer_json, tok):
    ckpt = os.path.join(OUT, case["name"])
    model = build(case)

    def write():
        shutil.rmtree(ckpt, ignore_errors=True)
        kwargs = {"max_shard_size": case["max_shard_size"]} if case["max_shard_size"] else {}
        model.save_pretrained(ckpt, **kwargs)
        if case["mtp"]:
            add_mtp_tensors(ckpt, case["text"]["hidden_size"])
        shutil.copy(tokenizer_json, os.path.join(ckpt, "tokenizer.json"))

    write()
    stop_prompt = None
    if case["choose_eos"]:
        # The same weights again, with the chosen eos ids in config.json and generation_config.json.
        stop_prompt, generation_eos, config_eos = choose_eos(case, ckpt, tok)
        model.config.get_text_config().eos_token_id = config_eos
        model.generation_config = GenerationConfig(eos_token_id=generation_eos, **case["generation"])
        write()

    golden = {"case": case["name"], "class": case["class"], "storage_dtype": str(case["dtype"]).split(".")[1],
              "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                           "tokenizers": tokenizers.__version__, "safetensors": safetensors.__version__},
              "tokenizer_size": TOKENIZER_IDS, "new_tokens": NEW_TOKENS, "runs": []}
    defaults = GenerationConfig.from_pretrained(ckpt)
    eos = defaults.eos_token_id
    golden["generation"] = {"eos_token_ids": [] if eos is None else [eos] if isinstance(eos, int) else list(eos),
                            "do_sample": bool(defaults.do_sample),
                            "temperature": defaults.temperature if defaults.do_sample else None,
                            "top_k": defaults.top_k if defaults.do_sample else None,
                            "top_p": defaults.top_p if defaults.do_sample else None}
    for dtype_name, dtype in [("f32", torch.float32), ("bf16", torch.bfloat16)]:
        model = load(case, ckpt, dtype)
        golden["parameters"] = text_parameters(model)
        for prompt in PROMPTS:
            ids = tok.encode(prompt).ids
            out = greedy(model, ids, NEW_TOKENS, eos_token_id=None)
            new = out.sequences[0, len(ids):].tolist()
            assert len(new) == NEW_TOKENS, new
            # Logits as float32 values (bf16 logits are exact in float32).
            golden["runs"].append({"dtype": dtype_name, "prompt": prompt, "prompt_ids": ids, "ids": new,
                                   "text": tok.decode(new, skip_special_tokens=False),
                                   "logits_first": f32_list(out.logits[0][0]),
                                   "logits_last": f32_list(out.logits[-1][0])})
            print(case["name"], dtype_name, repr(prompt), ids, new)
    if stop_prompt is not None:
        golden["stop_runs"] = stop_runs(case, ckpt, tok, stop_prompt)
    with open(os.path.join(OUT, case["name"] + ".golden.json"), "w") as f:
        json.dump(golden, f, separators=(",", ":"))
        f.write("\n")
    return golden


def main():
    synth = sys.argv[1]
    if os.path.exists(OUT):
        shutil.rmtree(OUT)
    os.makedirs(OUT)
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([synth, "--small", "--vocab", "320", "--tokenizer-vocab", str(TOKENIZER_VOCAB), "--seed", "1",
                        "--out", os.path.join(tmp, "synth")], check=True, stdout=subprocess.DEVNULL)
        tokenizer_json = os.path.join(tmp, "tokenizer.json")
        shutil.copy(os.path.join(tmp, "synth", "tokenizer.json"), tokenizer_json)
        tok = tokenizers.Tokenizer.from_file(tokenizer_json)
        assert tok.get_vocab_size(with_added_tokens=True) == TOKENIZER_IDS
        goldens = [make_case(case, tokenizer_json, tok) for case in CASES]
    # Rows the tokenizer lacks must be reachable, or the "choose over all rows" check could not fail.
    textless = sum(1 for g in goldens for r in g["runs"] for i in r["ids"] if i >= TOKENIZER_IDS)
    assert textless > 0, "no golden run generates an id past the tokenizer: change a seed"
    print(f"{textless} generated ids lie past the tokenizer's {TOKENIZER_IDS} ids")


if __name__ == "__main__":
    main()
