#!/usr/bin/env python3
"""Runs the chat GPU-tool bench: each question of questions.json through `qgpu-host chat`, scored.

One `qgpu-host --config CONFIG chat --gpu MODE --json ...` process per question, the question on
stdin (one user turn). From the JSON transcript it scores:

  called     the model made at least one tool call
  gpu        a call succeeded and its result is the expected answer (the GPU computed it); for an
             advanced task, the answer is read from the array (element) the task names
  answered   `gpu`, and the assistant's final text after that call contains the expected number
             (a list: its numbers in order) -- answered with the GPU-computed number
  first      advanced only: the first gpu_kernel call succeeded with the right answer

    python3 bench/chat/run.py --engine circuit --limit 3
    python3 bench/chat/run.py --config my_qwen35.yaml --json results.json

The score means something only on a real Qwen3.5 checkpoint (README.md).
"""

import argparse
import json
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))


# --- reading the transcript ----------------------------------------------------------------------

def parse_value(text):
    """A tool response as a value: "32" -> 32, "[1, 2]" -> [1, 2]; None when it is not one."""
    try:
        return json.loads(text.strip())
    except (ValueError, AttributeError):
        return None


def parse_arrays(text):
    """A gpu_kernel response, one "NAME = [..]" line per array, as {NAME: list}."""
    arrays = {}
    for line in text.splitlines():
        name, sep, value = line.partition(" = ")
        if sep:
            arrays[name.strip()] = parse_value(value)
    return arrays


def call_answer(call, entry):
    """The value a successful call gives for this entry's question (None when it gives none)."""
    if not call.get("ok"):
        return None
    if call.get("tool") == "gpu_kernel":
        spec = entry["answer"]
        array = parse_arrays(call.get("response", "")).get(spec["array"])
        if not isinstance(array, list):
            return None
        if "index" not in spec:
            return array
        return array[spec["index"]] if spec["index"] < len(array) else None
    return parse_value(call.get("response", ""))


def flatten(value):
    if isinstance(value, list):
        return [x for v in value for x in flatten(v)]
    return [value]


def visible_text(content):
    """An assistant turn without its thinking and any tool-call markup."""
    content = re.sub(r"<think>.*?</think>", " ", content, flags=re.S)
    content = re.sub(r"^.*?</think>", " ", content, flags=re.S)  # the prompt opened <think>
    content = re.sub(r"<tool_call>.*?(</tool_call>|$)", " ", content, flags=re.S)
    return content


def integers(text):
    """The integers written in a text, read two ways: as written, and with thousands separators
    ("1,234" or "1 234") joined; the caller accepts a match in either reading."""
    joined = re.sub(r"(?<=\d)[, ](?=\d{3}(?!\d))", "", text)
    return [[int(x) for x in re.findall(r"-?\d+", t)] for t in (text, joined)]


def mentions(text, expected):
    """Whether the text states the expected answer: a number among its integers, or a list's
    numbers as a contiguous run of them."""
    want = flatten(expected)
    for found in integers(text):
        for i in range(len(found) - len(want) + 1):
            if found[i:i + len(want)] == want:
                return True
    return False


def score(entry, transcript):
    calls = transcript.get("calls", [])
    turns = transcript.get("turns", [])
    expected = entry["expected"]
    result = {"called": bool(calls), "gpu": False, "answered": False, "first": None, "text_mentions": False}

    right = [c for c in calls if call_answer(c, entry) == expected]
    result["gpu"] = bool(right)
    # The final text: the last assistant turn that is not only a tool call.
    final_index, final_text = None, ""
    for index, turn in enumerate(turns):
        if turn.get("role") == "assistant" and not turn.get("tool_calls"):
            final_index, final_text = index, visible_text(turn.get("content", ""))
    result["text_mentions"] = mentions(final_text, expected)
    # Answered with the GPU's number: the statement comes after a call that computed it.
    result["answered"] = bool(right) and final_index is not None and result["text_mentions"] and \
        any(c.get("turn", -1) < final_index for c in right)
    if entry["mode"] == "advanced":
        kernels = [c for c in calls if c.get("tool") == "gpu_kernel"]
        result["first"] = bool(kernels) and call_answer(kernels[0], entry) == expected
    result["final_text"] = final_text.strip()
    result["calls"] = [{k: c.get(k) for k in ("tool", "subject", "ok", "response", "attempt")} for c in calls]
    return result


# --- running -------------------------------------------------------------------------------------

def run_question(entry, args):
    cmd = [args.host, "--config", args.config, "chat", "--gpu", entry["mode"], "--json"]
    for flag, value in (("--engine", args.engine), ("--dtype", args.dtype), ("--max-tokens", args.max_tokens),
                        ("--seed", args.seed), ("--temperature", args.temperature)):
        if value is not None:
            cmd += [flag, str(value)]
    if args.no_check:
        cmd.append("--no-check")
    started = time.monotonic()
    record = {"id": entry["id"], "mode": entry["mode"], "expected": entry["expected"], "error": None}
    try:
        done = subprocess.run(cmd, input=entry["question"] + "\n", capture_output=True, text=True,
                              timeout=args.timeout)
        if done.returncode != 0:
            lines = done.stderr.strip().splitlines()
            record["error"] = f"exit {done.returncode}: {lines[-1] if lines else ''}"
        else:
            record.update(score(entry, json.loads(done.stdout)))
    except subprocess.TimeoutExpired:
        record["error"] = f"timed out after {args.timeout} s"
    except ValueError as e:
        record["error"] = f"unreadable JSON transcript: {e}"
    record["seconds"] = round(time.monotonic() - started, 1)
    return record


def mark(value):
    return "-" if value is None else ("yes" if value else "no")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default=os.path.join(REPO, "configs", "simt_qwen2b.yaml"))
    parser.add_argument("--host", default=os.path.join(REPO, "build", "bin", "qgpu-host"))
    parser.add_argument("--questions", default=os.path.join(HERE, "questions.json"))
    parser.add_argument("--engine", default="model", choices=["model", "circuit", "interp"],
                        help="where the tool's launches run (default model)")
    parser.add_argument("--dtype", choices=["f32", "bf16"])
    parser.add_argument("--max-tokens", type=int, help="text tokens per assistant turn")
    parser.add_argument("--temperature", type=float)
    parser.add_argument("--seed", type=int)
    parser.add_argument("--no-check", action="store_true", help="do not replay launches on the interpreter")
    parser.add_argument("--mode", choices=["normal", "advanced"], help="only questions of this mode")
    parser.add_argument("--only", help="comma-separated question ids")
    parser.add_argument("--limit", type=int, help="at most this many questions")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds per question (default 1800)")
    parser.add_argument("--json", metavar="OUT", help="write the results to this file")
    args = parser.parse_args()

    if not os.access(args.host, os.X_OK):
        sys.exit(f"run.py: no qgpu-host at '{args.host}' (build it, or pass --host)")
    with open(args.questions) as f:
        entries = json.load(f)["questions"]
    if args.only:
        wanted = [x.strip() for x in args.only.split(",") if x.strip()]
        unknown = sorted(set(wanted) - {e["id"] for e in entries})
        if unknown:
            sys.exit(f"run.py: unknown question id(s): {', '.join(unknown)}")
        entries = [e for e in entries if e["id"] in wanted]
    if args.mode:
        entries = [e for e in entries if e["mode"] == args.mode]
    if args.limit is not None:
        entries = entries[:args.limit]

    print(f"{'id':20} {'mode':8} {'called':>6} {'gpu':>4} {'answered':>8} {'first':>5} {'seconds':>8}")
    results = []
    for entry in entries:
        r = run_question(entry, args)
        results.append(r)
        line = (f"{r['id']:20} {r['mode']:8} {mark(r.get('called')):>6} {mark(r.get('gpu')):>4} "
                f"{mark(r.get('answered')):>8} {mark(r.get('first')):>5} {r['seconds']:8.1f}")
        print(line + (f"  {r['error']}" if r["error"] else ""), flush=True)

    advanced = [r for r in results if r["mode"] == "advanced"]
    summary = {
        "questions": len(results),
        "errors": sum(1 for r in results if r["error"]),
        "called": sum(1 for r in results if r.get("called")),
        "gpu_correct": sum(1 for r in results if r.get("gpu")),
        "answered": sum(1 for r in results if r.get("answered")),
        "advanced": len(advanced),
        "first_try": sum(1 for r in advanced if r.get("first")),
        "seconds": round(sum(r["seconds"] for r in results), 1),
    }
    print(f"summary: {summary['answered']}/{summary['questions']} answered with the GPU-computed number; "
          f"{summary['gpu_correct']} GPU-correct, {summary['called']} with a tool call; advanced kernels right "
          f"at the first try {summary['first_try']}/{summary['advanced']}; {summary['errors']} error(s); "
          f"{summary['seconds']} s")
    if args.json:
        run = {k: getattr(args, k) for k in ("config", "engine", "dtype", "max_tokens", "temperature", "seed")}
        with open(args.json, "w") as f:
            json.dump({"run": run, "summary": summary, "results": results}, f, indent=2)
            f.write("\n")
    return 1 if summary["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
