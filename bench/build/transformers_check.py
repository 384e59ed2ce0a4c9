#!/usr/bin/env python3
"""A launch run by stock Hugging Face transformers on a checkpoint written by `qgpu-host build`.

Takes the launch's prompt ids from `qgpu-host run ... --engine model --json` (the merged model's
numbering, which a built checkpoint shares), loads the built directory with transformers'
AutoModelForCausalLM, feeds the prompt in one forward pass (transformers' own prefill: the
chunked Gated DeltaNet) and then decodes greedily one token at a time with its cache until the
HALT token (<|qgpu:HALT|>, from the built tokenizer), comparing every generated id with the ids
qgpu-host generated; then reads the arrays out of transformers' own cache (the circuit layers'
recurrent states) with the launch's `readout` and compares them with qgpu-host's. Prints one line
per mismatch (none expected), the arrays read, the smallest margin (winner - runner-up logit), the
time per token and the process's peak memory; exits 1 on any difference.

  build/bin/qgpu-host --config C run examples/dot.cu --grid 1 --block 4 --arg 'a=[1,2,3]' \\
      --arg 'b=[4,5,6]' --arg 'out=[0]' --arg n=3 --engine model --dtype bf16 --json > launch.json
  build/bin/qgpu-host --config C build --out DIR --dtype bf16
  python3 bench/build/transformers_check.py --checkpoint DIR --launch launch.json [--dtype bf16]

Needs python3 with torch, transformers and tokenizers (PyPI). With --golden FILE it also writes
what transformers generated (ids, margins, versions) as JSON.
"""
import argparse
import json
import resource
import sys
import time


def same_so_far(got, expected):
    return got == expected[:len(got)] and len(got) == len(expected)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--checkpoint", required=True, help="a directory written by qgpu-host build")
    ap.add_argument("--launch", required=True, help="qgpu-host run --engine model --json output")
    ap.add_argument("--dtype", choices=["f32", "bf16"], default="bf16")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--max-tokens", type=int, default=0, help="stop after this many (0: the launch's count)")
    ap.add_argument("--golden", help="write transformers' ids and margins here (JSON)")
    args = ap.parse_args()

    import torch
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.set_num_threads(args.threads)
    launch = json.load(open(args.launch))
    prompt, expected = launch["prompt_ids"], launch["generated_ids"]
    manifest = json.load(open(f"{args.checkpoint}/qgpu.json"))
    tokenizer = AutoTokenizer.from_pretrained(args.checkpoint)
    halt = tokenizer.convert_tokens_to_ids("<|qgpu:HALT|>")
    first = manifest["records"]["first_id"]
    print(f"transformers {transformers.__version__}, torch {torch.__version__}; {args.checkpoint}: "
          f"{manifest['circuit']['layers']} circuit + {manifest['base']['layers']} base layers, "
          f"records from id {first}, HALT = {halt}; prompt {len(prompt)} tokens, "
          f"qgpu generated {len(expected)}")

    t0 = time.perf_counter()
    model = AutoModelForCausalLM.from_pretrained(
        args.checkpoint, dtype=torch.float32 if args.dtype == "f32" else torch.bfloat16)
    model.eval()
    load_s = time.perf_counter() - t0

    limit = args.max_tokens or len(expected)
    got, margins, mismatches = [], [], 0
    with torch.no_grad():
        t0 = time.perf_counter()
        out = model(input_ids=torch.tensor([prompt]), use_cache=True)
        prefill_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        for step in range(limit):
            logits = out.logits[0, -1].float()
            top = torch.topk(logits, 2)
            token = int(top.indices[0])
            margins.append(float(top.values[0] - top.values[1]))
            got.append(token)
            want = expected[step] if step < len(expected) else None
            if token != want:
                mismatches += 1
                name = tokenizer.convert_ids_to_tokens(token)
                print(f"token {step}: transformers chose {token} ({name}), qgpu generated {want}")
                break
            if token == halt:
                break
            out = model(input_ids=torch.tensor([[token]]), past_key_values=out.past_key_values, use_cache=True)
        decode_s = time.perf_counter() - t0

    # The results, read from transformers' own cache: the state after the last token fed (HALT
    # is chosen, not fed, as qgpu-host does), decoded with the launch's readout (sdk::WordLocation:
    # bit b of a word is 1 when state[layer][first_head + b / bits_per_head][row][2 * (b % bits_per_head)]
    # is nonzero).
    read = {}
    readout = launch.get("readout", {})
    if same_so_far(got, expected) and readout:
        cache = out.past_key_values
        for name, words in readout.items():
            values = []
            for layer, first_head, heads, bits_per_head, row in words:
                state = cache.layers[layer].recurrent_states[0][0]  # [value heads, key dim, value dim]
                word = 0
                for b in range(min(32, heads * bits_per_head)):
                    if float(state[first_head + b // bits_per_head, row, 2 * (b % bits_per_head)]) != 0:
                        word |= 1 << b
                values.append(word - (1 << 32) if word >= 1 << 31 else word)
            read[name] = values
        print("read from transformers' state: " + ", ".join(f"{k} = {v}" for k, v in read.items()))
    names = tokenizer.convert_ids_to_tokens(got[:4])
    print(f"generated {len(got)} tokens ({', '.join(names)}, ...); smallest margin {min(margins):.4g}; "
          f"load {load_s:.1f} s, prefill {prefill_s:.2f} s, {1e3 * decode_s / max(len(got), 1):.0f} ms per token, "
          f"peak memory {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20:.1f} GB")
    same = mismatches == 0 and got == expected
    arrays_equal = not readout or read == launch["arrays"]
    if readout and not arrays_equal:
        print(f"arrays DIFFERENT from qgpu-host's: {launch['arrays']}")
    print("identical to qgpu-host's launch" + (" (tokens and arrays)" if readout else " (tokens)")
          if same and arrays_equal else "DIFFERENT from qgpu-host's launch")
    if args.golden:
        with open(args.golden, "w") as f:
            json.dump({"transformers": transformers.__version__, "torch": torch.__version__,
                       "dtype": args.dtype, "circuit_hash": manifest["circuit"]["hash"],
                       "prompt_ids": prompt, "generated_ids": got, "margins": margins, "arrays": read}, f,
                      indent=1)
            f.write("\n")
    return 0 if same and arrays_equal else 1


if __name__ == "__main__":
    sys.exit(main())
