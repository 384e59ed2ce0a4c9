#!/usr/bin/env python3
"""Goldens of the Qwen3.5 chat format with tools, rendered by Hugging Face transformers itself.

qwen35_chat_template.jinja beside this script is the official Qwen3.5 chat template, byte for byte
(7756 bytes, sha256 a4aee8af...c28f715; where it comes from: docs/TOKENIZER.md, "Chat format"). For
each transcript below this script renders the text with transformers' own `apply_chat_template`
(tokenize=False, chat_template=that file) and encodes it with `tokenizers` on the Qwen3.5
tokenizer.json of plugins/base_qwen35/tokenizer/tests/data/, and writes one JSON line per case to
chat_goldens.jsonl: the inputs exactly as given to apply_chat_template, the text and the ids.
The tokenizer tests (qwen35_tokenizer_tests, Qwen35Chat.*) render the same transcripts in C++ and
compare both. Nothing here runs at test time.

    python3 tests/golden/chat/make_chat_goldens.py      # transformers 5.24.0, jinja2 3.1.6, tokenizers 0.23.3
"""
import copy
import hashlib
import json
import lzma
import os
import sys

import jinja2
import tokenizers
import transformers
from transformers import PreTrainedTokenizerFast

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", "..", ".."))
TEMPLATE = os.path.join(HERE, "qwen35_chat_template.jinja")
TEMPLATE_SHA256 = "a4aee8afcf2e0711942cf848899be66016f8d14a889ff9ede07bca099c28f715"
TOKENIZER = os.path.join(ROOT, "plugins/base_qwen35/tokenizer/tests/data/qwen35_tokenizer.json.xz")
OUT = os.path.join(HERE, "chat_goldens.jsonl")


def tool(name, description, properties, required):
    return {"type": "function", "function": {"name": name, "description": description, "parameters": {
        "type": "object", "properties": properties, "required": required}}}


def call(name, **arguments):
    return {"type": "function", "function": {"name": name, "arguments": arguments}}


# The two tools of the chat's GPU (issue 18): normal mode takes an expression, advanced mode a kernel.
GPU = tool("gpu", "Evaluate an integer expression on the GPU inside this model and return the exact result. "
           "32-bit signed integers only, no floating point; vectors [1, 2, 3], matrices [[1, 2], [3, 4]], "
           "scalars; + - * elementwise, @ (dot, matrix-vector, matrix-matrix), sum, max, min, cumsum, sort, "
           "gcd, pow_mod, is_prime, fib, popcount. An overflow is an error, never a wrapped number.",
           {"expression": {"type": "string", "description": "e.g. [1, 2, 3] @ [4, 5, 6]"}}, ["expression"])
KERNEL = tool("gpu_kernel", "Compile a CUDA kernel (extern \"C\", int32 only, 1-D launches, 64 KiB of "
              "memory) and run it on the GPU inside this model; returns the arrays or the \"one-line\" error.\n"
              "Non-ASCII is kept: \u00e9\u00e8 \u4f60\u597d, control characters escaped: \t.",
              {"source": {"type": "string"}, "kernel": {"type": "string"}, "grid": {"type": "integer"},
               "block": {"type": "integer"}, "args": {"type": "array", "items": {"type": "string"}}},
              ["source", "kernel", "grid", "block", "args"])

KERNEL_SOURCE = """extern "C" __global__ void add(int* a, const int* b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) a[i] += b[i];
}"""

QUESTION = "What is the dot product of [1, 2, 3] and [4, 5, 6]?"
CASES = [
    # No tools: the format as chat uses it today.
    ("no_tools", [], [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "What is 2+2?"},
        {"role": "assistant", "content": "4"},
        {"role": "user", "content": "  And 3+3?\n"},  # content is trimmed
    ], True, False),
    ("no_tools_thinking", [], [
        {"role": "user", "content": "Hello!"},
    ], True, True),
    # The first prompt of a chat with the GPU tool: the tools block in the system turn, the system
    # message after it.
    ("tools_system", [GPU], [
        {"role": "system", "content": "You are a careful assistant."},
        {"role": "user", "content": QUESTION},
    ], True, False),
    ("tools_no_system", [GPU, KERNEL], [
        {"role": "user", "content": QUESTION},
    ], True, True),
    # A call, its response, and the prompt for the answer; the assistant turn after the query gets an
    # empty thinking block.
    ("call_and_response", [GPU], [
        {"role": "user", "content": QUESTION},
        {"role": "assistant", "content": "", "tool_calls": [call("gpu", expression="[1, 2, 3] @ [4, 5, 6]")]},
        {"role": "tool", "content": "32"},
    ], True, False),
    # The whole exchange answered, then a new question: turns before the last query lose the block.
    ("call_answered_next_question", [GPU], [
        {"role": "system", "content": "You are a careful assistant."},
        {"role": "user", "content": QUESTION},
        {"role": "assistant", "content": "", "tool_calls": [call("gpu", expression="[1, 2, 3] @ [4, 5, 6]")]},
        {"role": "tool", "content": "32"},
        {"role": "assistant", "content": "The dot product is 32."},
        {"role": "user", "content": "And the sum of the first?"},
    ], True, False),
    # Two calls in one assistant turn, after some text; then their two responses, grouped in one user turn.
    ("two_calls_two_responses", [GPU], [
        {"role": "user", "content": "Is 97 prime, and what is gcd(84, 36)?"},
        {"role": "assistant", "content": "I will ask the GPU for both.", "tool_calls": [
            call("gpu", expression="is_prime(97)"), call("gpu", expression="gcd(84, 36)")]},
        {"role": "tool", "content": "1"},
        {"role": "tool", "content": "12"},
        {"role": "assistant", "content": "97 is prime and gcd(84, 36) = 12."},
    ], False, False),
    # A multi-line parameter value (CUDA source), an integer argument, reasoning written in the content.
    ("multiline_kernel", [KERNEL], [
        {"role": "user", "content": "Add [1, 2] and [3, 4] with a kernel."},
        {"role": "assistant", "content": "<think>\nA 1-D kernel with one block.\n</think>\n\n", "tool_calls": [
            call("gpu_kernel", source=KERNEL_SOURCE, kernel="add", grid=1, block=2, args="[[1, 2], [3, 4], 2]")]},
        {"role": "tool", "content": "a = [4, 6]"},
    ], True, True),
    # Reasoning in an earlier answer is dropped; a blank system message adds nothing to the tools
    # block; whitespace around a response is trimmed.
    ("reasoning_dropped_blank_system", [GPU], [
        {"role": "system", "content": " \n "},
        {"role": "user", "content": "fib(10)?"},
        {"role": "assistant", "content": "<think>\nEasy: ask the GPU.\n</think>\n\nfib(10) = 55."},
        {"role": "user", "content": "And popcount(255)?"},
        {"role": "assistant", "content": "Asking.", "tool_calls": [call("gpu", expression="popcount(255)")]},
        {"role": "tool", "content": "\n 8 \t"},
    ], True, True),
]


def main():
    with open(TEMPLATE, "rb") as f:
        raw = f.read()
    if hashlib.sha256(raw).hexdigest() != TEMPLATE_SHA256:
        sys.exit(f"{TEMPLATE}: sha256 differs from the official template's")
    template = raw.decode("utf-8")
    tok_json = lzma.decompress(open(TOKENIZER, "rb").read()).decode("utf-8")
    backend = tokenizers.Tokenizer.from_str(tok_json)
    hf = PreTrainedTokenizerFast(tokenizer_object=tokenizers.Tokenizer.from_str(tok_json))
    with open(OUT, "w", encoding="utf-8") as out:
        for name, tools, messages, gen, think in CASES:
            kwargs = {"tools": copy.deepcopy(tools)} if tools else {}
            text = hf.apply_chat_template(copy.deepcopy(messages), chat_template=template, tokenize=False,
                                          add_generation_prompt=gen, enable_thinking=think, **kwargs)
            ids = backend.encode(text, add_special_tokens=False).ids
            out.write(json.dumps({"name": name, "tools": tools, "messages": messages, "add_generation_prompt": gen,
                                  "enable_thinking": think, "text": text, "ids": ids}, ensure_ascii=False) + "\n")
    print(f"{OUT}: {len(CASES)} cases (transformers {transformers.__version__}, jinja2 {jinja2.__version__}, "
          f"tokenizers {tokenizers.__version__})")


if __name__ == "__main__":
    main()
