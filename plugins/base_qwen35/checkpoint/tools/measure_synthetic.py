#!/usr/bin/env python3
"""Measures a synthetic Qwen3.5 checkpoint written by qgpu-synth-qwen35 (analysis only; nothing builds or
tests with it). The numbers in docs/CHECKPOINTS.md ("Embedding modes", "Stress base") come from it.

    python3 measure_synthetic.py DIR embedding            # clean channels, cosines, a 64-channel direction
    python3 measure_synthetic.py DIR stress [--dtype bf16] [--seq 64] [--batch 4] [--layout JSON]

`stress` runs Hugging Face transformers (eager attention, the torch fallbacks of the DeltaNet kernels) on
random token ids and on random input vectors, and prints per layer the residual's rms without the
massive channels, the massive channels' values, the first-token channel, the attention weight the sink
heads put on the first position, the final norm's scales and whether the logits are finite. The stress
layout (massive channels etc.) is read from the `stress:` line qgpu-synth-qwen35 prints, passed as
--layout 'massive=53,60,19 first=63 sinks=3 heads=2 dim=31'.

Needs numpy, torch, transformers, safetensors.
"""
import argparse
import json
import math
import os
import sys

import numpy as np


def load_embedding(ckpt):
    from safetensors import safe_open
    import torch
    files = [f for f in os.listdir(ckpt) if f.endswith(".safetensors")]
    for f in files:
        with safe_open(os.path.join(ckpt, f), "pt") as st:
            for k in st.keys():
                if k.endswith("embed_tokens.weight"):
                    return st.get_tensor(k).float().numpy()
    raise SystemExit("no embedding")


def embedding_report(ckpt):
    e = load_embedding(ckpt)
    rows, h = e.shape
    pos = (e > 0).sum(0)
    neg = (e < 0).sum(0)
    violators = np.minimum(rows - pos, rows - neg)  # rows not of the majority's strict sign
    clean = int((violators == 0).sum())
    norms = np.linalg.norm(e, axis=1)
    # Empirical mean direction: the mean row (close to the generator's u for anisotropic).
    mean = e.mean(0)
    u = mean / np.linalg.norm(mean)
    cos = (e @ u) / np.maximum(norms, 1e-30)
    sample = np.random.default_rng(0).choice(rows, size=(min(rows // 2, 4000), 2), replace=False)
    a, b = e[sample[:, 0]], e[sample[:, 1]]
    pair = (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
    share = np.sort(u ** 2)[::-1]
    top = np.argsort(-np.abs(u))[:64]
    u64 = np.zeros_like(u)
    u64[top] = u[top]
    proj64 = e @ u64
    zscore = np.abs(e.mean(0)) / e.std(0)
    print(f"embedding {rows} x {h}: rms {np.sqrt((e ** 2).mean()):.5f}, row norm mean {norms.mean():.4f} "
          f"(5%..95% {np.percentile(norms, 5):.4f}..{np.percentile(norms, 95):.4f})")
    print(f"channels of one strict sign on every row: {clean}; with exactly 1 row of the other sign: "
          f"{int((violators == 1).sum())}; fewest violators {int(violators.min())}; "
          f"max |mean|/std over channels {zscore.max():.2f}")
    print(f"cosine to the mean row's direction: mean {cos.mean():.3f}, 1%..99% {np.percentile(cos, 1):.3f}.."
          f"{np.percentile(cos, 99):.3f}, min {cos.min():.3f}, rows <= 0: {int((cos <= 0).sum())}")
    print(f"pairwise cosine (random pairs): mean {pair.mean():.3f}")
    print(f"mean direction: top-8 channels hold {share[:8].sum():.3f} of |u|^2, top-64 {share[:64].sum():.3f}; "
          f"rows with projection <= 0 on u restricted to its top 64 channels: {int((proj64 <= 0).sum())}")


def parse_layout(text):
    out = {}
    for item in text.split():
        k, v = item.split("=")
        out[k] = [int(x) for x in v.split(",")]
    return out


def stress_report(ckpt, dtype_name, seq, batch, layout):
    import torch
    from transformers import AutoModelForCausalLM
    dtype = {"f32": torch.float32, "bf16": torch.bfloat16}[dtype_name]
    model = AutoModelForCausalLM.from_pretrained(ckpt, dtype=dtype, attn_implementation="eager").eval()
    cfg = model.config
    layers = model.model.layers
    h = cfg.hidden_size
    massive = layout.get("massive", [])
    first = layout.get("first", [None])[0]
    sinks = layout.get("sinks", [])
    heads = layout.get("heads", [0])[0]
    special = set(massive + ([first] if first is not None else []))
    bulk_idx = torch.tensor([i for i in range(h) if i not in special])

    outputs = []
    hooks = [layer.register_forward_hook(lambda m, i, o: outputs.append(o[0] if isinstance(o, tuple) else o))
             for layer in layers]
    g = torch.Generator().manual_seed(0)
    real_rows = cfg.vocab_size
    ids = torch.randint(0, real_rows, (batch, seq), generator=g)
    with torch.no_grad():
        out = model(ids, output_attentions=True)
    for hk in hooks:
        hk.remove()
    emb = model.model.embed_tokens(ids).float()
    emb_rms = emb.pow(2).mean().sqrt().item()
    print(f"{dtype_name}: {batch} sequences of {seq} random token ids; embedding rms {emb_rms:.5f}")
    print("layer | bulk rms (positions >= 1, massive/first-token channels excluded) | x emb | massive channels "
          "min..max over tokens | first-token channel at 0 / max |.| elsewhere")
    for i, o in enumerate(outputs):
        o = o.float()
        bulk = o[:, 1:, bulk_idx].pow(2).mean().sqrt().item()
        ms = " ".join(f"{o[:, :, c].min().item():.0f}..{o[:, :, c].max().item():.0f}" for c in massive)
        ft = ""
        if first is not None:
            ft = f"{o[:, 0, first].mean().item():.0f} / {o[:, 1:, first].abs().max().item():.2f}"
        print(f"{i:3d} | {bulk:9.3f} | {bulk / emb_rms:8.1f} | {ms} | {ft}")
    full = [i for i, t in enumerate(cfg.layer_types) if t == "full_attention"]
    for l in sinks:
        # transformers returns one entry per layer, or (newer versions) per full-attention layer.
        a = out.attentions[l if len(out.attentions) == len(layers) else full.index(l)].float()  # [b, heads, q, k]
        row = []
        probes = [t for t in (16, 64, 256, 1024) if t < seq] + [seq - 1]
        for hd in range(cfg.num_attention_heads):
            w0 = a[:, hd, 1:, 0]
            at = ", ".join(f"t={t} {a[:, hd, t, 0].mean().item():.3f}" for t in probes)
            row.append(f"h{hd}: mean {w0.mean().item():.3f} ({at})")
        print(f"layer {l} attention weight on position 0 (queries t >= 1):")
        for r in row:
            print("   ", r)
    logits = out.logits.float()
    print(f"logits finite: {bool(torch.isfinite(logits).all())}; rms {logits.pow(2).mean().sqrt().item():.3f}, "
          f"max |.| {logits.abs().max().item():.3f}; distinct argmax over positions: "
          f"{len(set(logits.argmax(-1).flatten().tolist()))} of {batch * seq}")
    w = model.model.norm.weight.float() + 1
    mag = w.abs()
    print(f"final norm scales 1+w: min {w.min().item():.4f}, max {w.max().item():.3f}, negative {(w < 0).sum().item()}, "
          f"|1+w| < 0.01: {(mag < 0.01).sum().item()}, smallest |1+w| >= 0.01: {mag[mag >= 0.01].min().item():.4f}; "
          f"massive channels' scales {[round(w[c].item(), 4) for c in massive]}")

    # The massive construction on arbitrary inputs: random vectors at several scales as the embedding output;
    # what the massive layer adds to each massive channel (its output minus its input).
    m = layout.get("layer", [1])[0]
    print(f"added to the massive channels by layer {m} for random input vectors (inputs_embeds):")
    for scale in [0.02, 1.0, 100.0, 1e4]:
        seen = []
        hooks = [layers[m].register_forward_hook(
            lambda mod, i, o: seen.append(((o[0] if isinstance(o, tuple) else o) - i[0]).float()))]
        x = (torch.randn(batch, seq, h, generator=g) * scale).to(dtype)
        with torch.no_grad():
            model.model(inputs_embeds=x)
        for hk in hooks:
            hk.remove()
        d = seen[0]
        ms = " ".join(f"{d[:, :, c].min().item():.0f}..{d[:, :, c].max().item():.0f}" for c in massive)
        print(f"   N(0, {scale}^2): {ms}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("ckpt")
    ap.add_argument("what", choices=["embedding", "stress"])
    ap.add_argument("--dtype", default="f32")
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--layout", default="")
    a = ap.parse_args()
    if a.what == "embedding":
        embedding_report(a.ckpt)
    else:
        stress_report(a.ckpt, a.dtype, a.seq, a.batch, parse_layout(a.layout))


if __name__ == "__main__":
    main()
