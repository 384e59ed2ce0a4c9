#!/usr/bin/env python3
"""Runs the random programs of earlier differential.py runs through the interpreter's race checker.

The generator (kernelgen.py) writes race-free programs, so every report is a false alarm of the
checker (or a race the generator let through). For each WORKDIR given (differential.py --workdir),
its batch_interp.jsonl runs as `qgpu-host batch ... --racecheck` (one process); prints how many
launches were clean, reported a race, or ended otherwise (the machine's refusals), and the first
reports.

  racecheck.py --host build/bin/qgpu-host --config configs/simt_qwen2b.yaml WORKDIR [WORKDIR ...]

Exits 1 if any launch reported a race.
"""
import argparse
import collections
import json
import os
import subprocess
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--host", required=True)
    ap.add_argument("--config", required=True)
    ap.add_argument("workdirs", nargs="+")
    args = ap.parse_args()
    counts = collections.Counter()
    reports = []
    for workdir in args.workdirs:
        batch = os.path.join(workdir, "batch_interp.jsonl")
        p = subprocess.run([args.host, "--config", args.config, "batch", batch, "--racecheck"],
                           capture_output=True, text=True)
        if p.returncode not in (0, 1):  # 1: some launch failed, reported on its line
            sys.exit(f"racecheck: {batch}: qgpu-host batch exited {p.returncode}: {p.stderr.strip()}")
        lines = open(batch).read().splitlines()  # a result's "line" is its launch's line number
        for out in p.stdout.splitlines():
            result = json.loads(out)
            if "error" not in result:
                counts["clean"] += 1
            elif "race (racecheck)" in result["error"]["message"]:
                counts["race"] += 1
                reports.append(f"{json.loads(lines[result['line'] - 1])['file']}: {result['error']['message']}")
            else:
                counts["ended otherwise"] += 1
    print("racecheck: " + ", ".join(f"{v} {k}" for k, v in sorted(counts.items())))
    for r in reports[:10]:
        print(r)
    return 1 if reports else 0


if __name__ == "__main__":
    sys.exit(main())
