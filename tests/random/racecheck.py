#!/usr/bin/env python3
"""Runs the random programs of earlier differential.py runs through the interpreter's race checker.

The generator (kernelgen.py) writes race-free programs, so every report is a false alarm of the
checker (or a race the generator let through). For each WORKDIR given (differential.py --workdir),
every launch of its batch_interp.jsonl runs as `qgpu-host run ... --racecheck`; prints how many were
clean, reported a race, or ended otherwise (the machine's refusals), and the first reports.

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
        with open(os.path.join(workdir, "batch_interp.jsonl")) as f:
            for line in f:
                launch = json.loads(line)
                cmd = [args.host, "--config", args.config, "run", launch["file"], "--kernel", launch["kernel"],
                       "--grid", launch["grid"], "--block", launch["block"], "--racecheck"]
                for a in launch["args"]:
                    cmd += ["--arg", a]
                p = subprocess.run(cmd, capture_output=True, text=True)
                if p.returncode == 0:
                    counts["clean"] += 1
                elif "race (racecheck)" in p.stderr:
                    counts["race"] += 1
                    reports.append(f"{launch['file']}: {p.stderr.strip()}")
                else:
                    counts["ended otherwise"] += 1
    print("racecheck: " + ", ".join(f"{v} {k}" for k, v in sorted(counts.items())))
    for r in reports[:10]:
        print(r)
    return 1 if reports else 0


if __name__ == "__main__":
    sys.exit(main())
