#!/usr/bin/env python3
"""`qgpu-host batch` on tests/e2e/batch/dot.jsonl: a result line per launch, failures as error lines.

    check_batch.py BATCH_FILE ENGINE -- QGPU-HOST --config CONFIG

Runs the batch twice, from the file and from stdin (`-`, relative files then from the working
directory: run from the batch file's directory), and checks every line: the dot products computed
here, the refused launches' codes and messages, the summary on stderr and exit 1 (a launch failed).
ENGINE circuit adds --check (every generated token equal to the interpreter's).
"""
import json
import os
import subprocess
import sys

batch, engine = sys.argv[1], sys.argv[2]
host = sys.argv[sys.argv.index("--") + 1:]
flags = ["--engine", engine] + (["--check"] if engine != "interp" else [])


def dot(a, b, out, n):
    return out + sum(x * y for x, y in zip(a[:n], b[:n]))


expected = {  # line number in dot.jsonl -> out, or (error code, message fragment)
    2: [dot([1, 2, 3], [4, 5, 6], 0, 3)],
    4: [dot(list(range(1, 9)), [1] * 8, 100, 8)],
    5: ("invalid-argument", "missing --arg for parameter 'n'"),
    6: [dot([-2, 5], [3, 3], 1, 2)],
    7: ("not-found", "missing.cu' does not exist"),
    8: ("invalid-argument", "no \"file\""),
    9: ("parse-error", "not a JSON object"),
}
failures = []
for source in ("file", "stdin"):
    cmd = host + ["batch", batch if source == "file" else "-"] + flags
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=os.path.dirname(os.path.abspath(batch)),
                          stdin=open(batch) if source == "stdin" else subprocess.DEVNULL)
    lines = [json.loads(l) for l in proc.stdout.splitlines()]
    got = {r["line"]: r for r in lines}
    if proc.returncode != 1:
        failures.append(f"{source}: exit {proc.returncode}, expected 1 (a launch failed): {proc.stderr.strip()}")
    if sorted(got) != sorted(expected):
        failures.append(f"{source}: result lines {sorted(got)}, expected {sorted(expected)}")
    summary = f"batch: {len(expected)} launches, 4 failed"
    if summary not in proc.stderr:
        failures.append(f"{source}: stderr lacks '{summary}': {proc.stderr.strip()}")
    for line, want in expected.items():
        r = got.get(line, {})
        if isinstance(want, list):
            if r.get("arrays", {}).get("out") != want:
                failures.append(f"{source}: line {line}: {r}, expected out = {want}")
            if engine != "interp" and not (r.get("check", {}).get("ok") and r.get("tokens", {}).get("generated", 0) > 0):
                failures.append(f"{source}: line {line}: no passing --check: {r}")
        else:
            code, fragment = want
            err = r.get("error", {})
            if err.get("code") != code or fragment not in err.get("message", ""):
                failures.append(f"{source}: line {line}: {r}, expected error {code} with '{fragment}'")
for f in failures:
    print("FAIL:", f)
print(f"check_batch: {engine}: {'ok' if not failures else f'{len(failures)} failures'}")
sys.exit(1 if failures else 0)
