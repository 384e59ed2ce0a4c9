#!/usr/bin/env python3
"""Checks the expected answers in questions.json against plain-Python computations.

Every question keeps its inputs as a structured `reference`: {"op": NAME, "args": [...]} where an
argument is an integer, a list, a matrix (list of lists) or another {"op": ...} node. This script
evaluates that tree with the small functions below (no qgpu involved) and compares the result with
the entry's stored `expected`. It exits 1 on any mismatch or malformed entry, 0 otherwise.

    python3 bench/chat/answers.py            # check every entry
    python3 bench/chat/answers.py --host H   # also run each entry's example expression / reference
                                             # kernel with `H eval|run --engine interp` and report
                                             # whether the machine can do it within its limits

`--host` is a feasibility check of the bench (sizes within 126 words, no int32 overflow), never
the source of an expected answer: a disagreement is reported as a problem with the question.
"""

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1


# --- the reference operations --------------------------------------------------------------------

def dot(u, v):
    assert len(u) == len(v), "dot: lengths differ"
    return sum(x * y for x, y in zip(u, v))


def matvec(m, v):
    return [dot(row, v) for row in m]


def matmul(a, b):
    columns = [list(col) for col in zip(*b)]
    return [[dot(row, col) for col in columns] for row in a]


def elementwise(f):
    """Lifts a scalar function to scalars and equal-length vectors (a scalar goes with a vector)."""
    def lifted(*args):
        lengths = {len(a) for a in args if isinstance(a, list)}
        if not lengths:
            return f(*args)
        assert len(lengths) == 1, "elementwise: lengths differ"
        n = lengths.pop()
        columns = [a if isinstance(a, list) else [a] * n for a in args]
        return [f(*xs) for xs in zip(*columns)]
    return lifted


def is_prime(n):
    if n < 2:
        return 0
    d = 2
    while d * d <= n:
        if n % d == 0:
            return 0
        d += 1
    return 1


def fib(n):
    a, b = 0, 1
    for _ in range(n):
        a, b = b, a + b
    return a


def popcount(x):
    return bin(x & 0xFFFFFFFF).count("1")  # the 32-bit word, as the machine sees it


def cumsum(v):
    out, total = [], 0
    for x in v:
        total += x
        out.append(total)
    return out


def triangular(n):
    total = 0
    for k in range(1, n + 1):
        total += k
    return total



OPS = {
    "dot": lambda u, v: dot(u, v),
    "matvec": matvec,
    "matmul": matmul,
    "add": elementwise(lambda x, y: x + y),
    "sub": elementwise(lambda x, y: x - y),
    "mul": elementwise(lambda x, y: x * y),
    "sum": sum,
    "max": max,
    "min": min,
    "cumsum": cumsum,
    "sort": sorted,
    "gcd": elementwise(lambda a, b: math.gcd(a, b)),
    "pow_mod": elementwise(lambda b, e, m: pow(b, e, m)),
    "is_prime": elementwise(is_prime),
    "fib": elementwise(fib),
    "popcount": elementwise(popcount),
    # advanced-mode tasks
    "count_multiples": lambda v, k: sum(1 for x in v if x % k == 0),
    "sum_squares": lambda v: sum(x * x for x in v),
    "count_greater": lambda v, t: sum(1 for x in v if x > t),
    "reverse": lambda v: list(reversed(v)),
    "triangular": lambda v: [triangular(x) for x in v],
}


def evaluate(node):
    """Evaluates a reference tree; every intermediate value must fit int32, as on the machine."""
    if isinstance(node, dict):
        name = node["op"]
        if name not in OPS:
            raise ValueError(f"unknown reference op '{name}'")
        value = OPS[name](*[evaluate(a) for a in node["args"]])
        check_int32(value, name)
        return value
    check_int32(node, "literal")
    return node


def check_int32(value, where):
    if isinstance(value, list):
        for v in value:
            check_int32(v, where)
    elif not (isinstance(value, int) and INT32_MIN <= value <= INT32_MAX):
        raise ValueError(f"{where}: {value!r} is not an int32")


# --- the optional feasibility check on the machine ------------------------------------------------

def host_value(host, config, entry):
    """What `qgpu-host ... --engine interp` gives for the entry's example call, as the bench scores it."""
    if entry["mode"] == "normal":
        cmd = [host, "--config", config, "eval", "--engine", "interp", entry["expression"]]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            return None, done.stderr.strip().splitlines()[-1:]
        return json.loads(done.stdout.strip().splitlines()[-1]), None
    kernel = entry["reference_kernel"]
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "kernel.cu")
        with open(path, "w") as f:
            f.write(kernel["source"])
        cmd = [host, "--config", config, "run", path, "--engine", "interp", "--kernel", kernel["kernel"],
               "--grid", str(kernel["grid"]), "--block", str(kernel["block"])]
        for arg in kernel["args"]:
            cmd += ["--arg", arg]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        return None, done.stderr.strip().splitlines()[-1:]
    arrays = {}
    for line in done.stdout.splitlines():
        name, sep, value = line.partition(" = ")
        if sep:
            arrays[name.strip()] = json.loads(value)
    answer = entry["answer"]
    array = arrays.get(answer["array"])
    if array is None:
        return None, [f"no array '{answer['array']}' in the output"]
    return (array[answer["index"]] if "index" in answer else array), None


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", default=os.path.join(HERE, "questions.json"))
    parser.add_argument("--host", help="also check feasibility with this qgpu-host (interp engine)")
    parser.add_argument("--config", default=os.path.join(REPO, "configs", "simt_qwen2b.yaml"))
    args = parser.parse_args()

    with open(args.questions) as f:
        entries = json.load(f)["questions"]
    problems = 0
    seen = set()
    for entry in entries:
        qid = entry.get("id", "?")
        try:
            if qid in seen:
                raise ValueError("duplicate id")
            seen.add(qid)
            if entry["mode"] not in ("normal", "advanced"):
                raise ValueError(f"mode '{entry['mode']}'")
            computed = evaluate(entry["reference"])
        except (KeyError, TypeError, ValueError, AssertionError) as e:
            print(f"{qid}: bad entry: {e!r}")
            problems += 1
            continue
        status = "ok" if computed == entry.get("expected") else "MISMATCH"
        if status != "ok":
            problems += 1
        line = f"{qid:18} {entry['mode']:8} expected {entry.get('expected')!s:28} python {computed!s:28} {status}"
        if args.host:
            value, error = host_value(args.host, args.config, entry)
            if error:
                line += f"  host: FAILED {' '.join(error)}"
                problems += 1
            elif value != computed:
                line += f"  host: {value} DIFFERS"
                problems += 1
            else:
                line += "  host: same"
        print(line)
    normal = sum(1 for e in entries if e.get("mode") == "normal")
    print(f"{len(entries)} entries ({normal} normal, {len(entries) - normal} advanced), {problems} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
