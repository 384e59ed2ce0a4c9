#!/usr/bin/env python3
"""A Qwen3.5 checkpoint with Qwen3.5-2B's (or --shape 0.8b / 4b) layer shapes, initialised and written by
Hugging Face transformers.

transformers builds `Qwen3_5ForConditionalGeneration` from a config (`AutoConfig.for_model("qwen3_5", ...)`:
hidden 2,048, 16 + 16 DeltaNet heads of 128, 8 query / 2 KV heads of 256, MLP 6,144, vocabulary 248,320,
tied embeddings, `--layers` layers of the (L, L, L, F) pattern ending with a full-attention layer) and
initialises it with its own `_init_weights` (embedding N(0, 0.02): no channel of one sign), then
`save_pretrained` writes it in bf16. The tokenizer is our synthetic one (its ids are a prefix of the rows).
Not a product dependency: the merged-model measurements (bench/merge/README.md) use it as the
"transformers-initialised" base.

    python3 bench/merge/make_hf_base.py --out /tmp/hf2b --layers 2 --tokenizer build/share/qgpu/synthetic-qwen35-2b/tokenizer.json
"""
import argparse
import shutil

import torch
from transformers import AutoConfig, Qwen3_5ForConditionalGeneration


# Published layer shapes (shared/QWEN35.md §1.4): hidden, MLP, query heads, KV heads, DeltaNet value heads.
SHAPES = {"0.8b": (1024, 3584, 8, 2, 16), "2b": (2048, 6144, 8, 2, 16), "4b": (2560, 9216, 16, 4, 32)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--vocab", type=int, default=248320)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--shape", choices=sorted(SHAPES), default="2b", help="the published model whose layer shapes to use")
    ap.add_argument("--tokenizer", required=True, help="a tokenizer.json whose ids fit the vocabulary")
    a = ap.parse_args()
    hidden, inter, heads, kv, nv = SHAPES[a.shape]
    types = ["full_attention" if (i + 1) % 4 == 0 or i == a.layers - 1 else "linear_attention" for i in range(a.layers)]
    text = dict(vocab_size=a.vocab, hidden_size=hidden, intermediate_size=inter, num_hidden_layers=a.layers,
                num_attention_heads=heads, num_key_value_heads=kv, head_dim=256, linear_num_key_heads=16,
                linear_num_value_heads=nv, linear_key_head_dim=128, linear_value_head_dim=128,
                linear_conv_kernel_dim=4, layer_types=types, tie_word_embeddings=True, eos_token_id=248044,
                rope_parameters={"rope_type": "default", "rope_theta": 1e7, "partial_rotary_factor": 0.25,
                                 "mrope_section": [11, 11, 10], "mrope_interleaved": True})
    vision = dict(depth=1, hidden_size=64, intermediate_size=128, num_heads=2, patch_size=16, temporal_patch_size=2,
                  spatial_merge_size=2, out_hidden_size=hidden, num_position_embeddings=16)
    config = AutoConfig.for_model("qwen3_5", text_config=text, vision_config=vision, tie_word_embeddings=True)
    torch.manual_seed(a.seed)
    model = Qwen3_5ForConditionalGeneration(config).to(torch.bfloat16)
    model.save_pretrained(a.out)
    shutil.copy(a.tokenizer, a.out + "/tokenizer.json")
    emb = model.get_input_embeddings().weight.float()
    one_sign = int(((emb > 0).all(0) | (emb < 0).all(0)).sum())
    print(f"wrote {a.out}: {a.layers} layers {types}, embedding std {emb.std():.4f}, channels of one sign: {one_sign}")


if __name__ == "__main__":
    main()
