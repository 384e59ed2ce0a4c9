#!/usr/bin/env python3
"""Golden data for backend_torch: small random Qwen3.5 text models run by Hugging Face transformers.

Regenerate (from the repository root; needs a venv with torch, transformers, safetensors from PyPI,
and neither fla, causal_conv1d nor kernels installed, so transformers uses its torch code paths):

    /work/venv-torch/bin/python plugins/backend_torch/tests/golden/make_golden.py

For each model NAME this writes NAME.json (config, prompt, package versions, tensor manifest) and
NAME.bin (raw little-endian tensors at the manifest's offsets). Weights are random but rounded to
bf16 so the fp32 and bf16 runs use the same values; they are stored as bf16. Activations of the fp32
run are stored as f32, those of the bf16 run as bf16 (exact).

Recorded per dtype (prefix f32./bf16.), phase p (0 = prefill of the prompt, k = decode step k after
it, one token, continuing the cache):
  p.embed                 embedding output                          [T, H]
  p.layers.i.in           decoder layer i input (residual stream)    [T, H]
  p.layers.i.norm1        input_layernorm output (mixer input)      [T, H]
  p.layers.i.mixer        linear_attn / self_attn output            [T, H]
  p.layers.i.mid          residual after the mixer (post norm input)[T, H]
  p.layers.i.norm2        post_attention_layernorm output (MLP in)  [T, H]
  p.layers.i.mlp          MLP output                                [T, H]
  p.final                 final norm output                         [T, H]
  p.logits                logits                                    [T, vocab]
  full.logits             one cache-less forward over prompt+decode tokens, last len(decode) rows
"""
import json
import math
import os
import sys

import numpy as np
import torch
import transformers
from transformers import Qwen3_5ForCausalLM, Qwen3_5TextConfig

OUT_DIR = os.path.dirname(os.path.abspath(__file__))

MODELS = [
    # name, config overrides, prompt length, decode steps, record per-op activations
    ("tiny", dict(hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=2,
                  head_dim=32, linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=16,
                  linear_value_head_dim=16, vocab_size=256, tie_word_embeddings=True), 70, 4, True),
    ("untied", dict(hidden_size=96, intermediate_size=160, num_attention_heads=2, num_key_value_heads=1,
                    head_dim=48, linear_num_key_heads=3, linear_num_value_heads=3, linear_key_head_dim=32,
                    linear_value_head_dim=24, vocab_size=200, tie_word_embeddings=False), 20, 3, False),
    # The real per-head shapes of Qwen3.5 (DeltaNet 128/128, attention 256 with RoPE on 64) on a tiny hidden size.
    ("realheads", dict(hidden_size=32, intermediate_size=64, num_attention_heads=2, num_key_value_heads=1,
                       head_dim=256, linear_num_key_heads=1, linear_num_value_heads=2, linear_key_head_dim=128,
                       linear_value_head_dim=128, vocab_size=96, tie_word_embeddings=True), 66, 3, False),
]


def make_config(overrides):
    cfg = Qwen3_5TextConfig(
        num_hidden_layers=4,
        layer_types=["linear_attention"] * 3 + ["full_attention"],
        linear_conv_kernel_dim=4,
        rms_norm_eps=1e-6,
        hidden_act="silu",
        max_position_embeddings=4096,
        rope_parameters={"rope_type": "default", "rope_theta": 1e7, "partial_rotary_factor": 0.25,
                         "mrope_interleaved": True, "mrope_section": [11, 11, 10]},
        **overrides,
    )
    cfg._attn_implementation = "eager"
    return cfg


def randomize(model, gen):
    """Weights with O(1) activations (HF's init gives near-zero norms and logits); bf16-exact."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("embed_tokens.weight") or name == "lm_head.weight":
                v = torch.randn(p.shape, generator=gen)
            elif name.endswith("conv1d.weight"):
                v = torch.randn(p.shape, generator=gen) * 0.5
            elif name.endswith("A_log"):
                v = torch.log(torch.rand(p.shape, generator=gen) * 7.5 + 0.5)
            elif name.endswith("dt_bias"):
                v = torch.randn(p.shape, generator=gen) * 0.5
            elif name.endswith("linear_attn.norm.weight"):
                v = 1.0 + torch.randn(p.shape, generator=gen) * 0.2
            elif name.endswith("norm.weight"):  # zero-centred norms: scale 1 + w
                v = torch.randn(p.shape, generator=gen) * 0.2
            else:  # Linear [out, in]
                v = torch.randn(p.shape, generator=gen) / math.sqrt(p.shape[-1])
            p.copy_(v.to(torch.bfloat16).to(torch.float32))


class Recorder:
    def __init__(self, model):
        self.phase = None
        self.data = {}
        self.handles = []
        m = model.model
        self._hook(m.embed_tokens, "embed", out=True)
        for i, layer in enumerate(m.layers):
            self._hook(layer, f"layers.{i}.in", out=False)
            self._hook(layer.input_layernorm, f"layers.{i}.norm1", out=True)
            mixer = layer.linear_attn if layer.block_type == "linear_attention" else layer.self_attn
            self._hook(mixer, f"layers.{i}.mixer", out=True)
            self._hook(layer.post_attention_layernorm, f"layers.{i}.mid", out=False)
            self._hook(layer.post_attention_layernorm, f"layers.{i}.norm2", out=True)
            self._hook(layer.mlp, f"layers.{i}.mlp", out=True)
        self._hook(m.norm, "final", out=True)

    def _hook(self, module, name, out):
        def fn(mod, args, kwargs, output):
            if self.phase is None:
                return
            if out:
                t = output[0] if isinstance(output, tuple) else output
            else:
                t = args[0] if args else kwargs["hidden_states"]
            self.data[f"{self.phase}.{name}"] = t[0].detach().clone()
        self.handles.append(module.register_forward_hook(fn, with_kwargs=True))


def run(model, prompt, decode, record_ops):
    rec = Recorder(model) if record_ops else None
    out = {}
    with torch.no_grad():
        if rec:
            rec.phase = 0
        r = model(input_ids=torch.tensor([prompt]), use_cache=True)
        out["0.logits"] = r.logits[0]
        cache = r.past_key_values
        for k, tok in enumerate(decode, start=1):
            if rec:
                rec.phase = k
            r = model(input_ids=torch.tensor([[tok]]), cache=cache, use_cache=True)
            out[f"{k}.logits"] = r.logits[0]
            cache = r.past_key_values
        if rec:
            rec.phase = None
        full = model(input_ids=torch.tensor([prompt + decode]), use_cache=False)
        out["full.logits"] = full.logits[0, len(prompt):]
    if rec:
        out.update(rec.data)
        for h in rec.handles:
            h.remove()
    return out


class BinWriter:
    def __init__(self):
        self.chunks, self.entries, self.offset = [], [], 0

    def add(self, name, t):
        t = t.detach().contiguous()
        if t.dtype == torch.bfloat16:
            raw, dt = t.view(torch.int16).numpy().astype("<i2").tobytes(), "bf16"
        else:
            raw, dt = t.to(torch.float32).numpy().astype("<f4").tobytes(), "f32"
        self.entries.append({"name": name, "dtype": dt, "shape": list(t.shape), "offset": self.offset,
                             "nbytes": len(raw)})
        self.chunks.append(raw)
        self.offset += len(raw)


def main():
    torch.set_num_threads(2)
    versions = {"torch": torch.__version__, "transformers": transformers.__version__,
                "numpy": np.__version__, "python": sys.version.split()[0]}
    for mod in ("fla", "causal_conv1d", "kernels"):
        try:
            __import__(mod)
            sys.exit(f"{mod} is installed: transformers would use its kernels; use a venv without it")
        except ImportError:
            pass
    for idx, (name, overrides, prompt_len, steps, record_ops) in enumerate(MODELS):
        cfg = make_config(overrides)
        gen = torch.Generator().manual_seed(1234 + idx)
        model = Qwen3_5ForCausalLM(cfg).eval()
        randomize(model, gen)
        prompt = torch.randint(0, cfg.vocab_size, (prompt_len,), generator=gen).tolist()
        decode = torch.randint(0, cfg.vocab_size, (steps,), generator=gen).tolist()

        w = BinWriter()
        for pname, p in model.state_dict().items():
            if pname == "lm_head.weight" and cfg.tie_word_embeddings:
                continue
            w.add(pname, p.to(torch.bfloat16))
        for dtype, tag in ((torch.float32, "f32"), (torch.bfloat16, "bf16")):
            m = model.to(dtype)
            assert m.model.layers[0].linear_attn.A_log.dtype == dtype  # HF rounds A_log with the model
            for key, t in run(m, prompt, decode, record_ops).items():
                w.add(f"{tag}.{key}", t)
        model.to(torch.float32)

        manifest = {
            "format": "qgpu-golden-1",
            "generator": "plugins/backend_torch/tests/golden/make_golden.py",
            "versions": versions,
            "attn_implementation": "eager",
            "config": {k: getattr(cfg, k) for k in (
                "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                "num_key_value_heads", "head_dim", "linear_num_key_heads", "linear_num_value_heads",
                "linear_key_head_dim", "linear_value_head_dim", "linear_conv_kernel_dim", "vocab_size",
                "rms_norm_eps", "tie_word_embeddings", "layer_types")},
            "rope_theta": cfg.rope_parameters["rope_theta"],
            "partial_rotary_factor": cfg.rope_parameters["partial_rotary_factor"],
            "prompt": prompt,
            "decode": decode,
            "tensors": w.entries,
        }
        with open(os.path.join(OUT_DIR, f"{name}.bin"), "wb") as f:
            for c in w.chunks:
                f.write(c)
        with open(os.path.join(OUT_DIR, f"{name}.json"), "w") as f:
            json.dump(manifest, f, indent=1)
            f.write("\n")
        print(f"{name}: {len(w.entries)} tensors, {w.offset} bytes")


if __name__ == "__main__":
    main()
