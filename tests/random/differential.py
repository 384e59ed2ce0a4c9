#!/usr/bin/env python3
"""Random CUDA kernels through qgpu's engines against their own reference semantics (issue 23, item 1).

Each seed gives one program (kernelgen.py): its CUDA text goes through clang-16 and qgpu's front end,
and one launch runs on each engine asked for (`qgpu-host batch`: one process per engine, the circuit
compiled once). Results are compared with the generator's evaluation of the program, word for word;
with --check the circuit's every generated token is also compared with the interpreter's stream.

A launch the machine refuses with a clear limit (ROM blocks, registers, ...) is counted by reason, not a
failure. A wrong array, a crash, an internal error or a --check mismatch is a failure: with --reduce it is
shrunk (delta reduction of the program tree) and with --save DIR written as a regression case, which
--replay DIR runs again.

  differential.py --host build/bin/qgpu-host --config configs/simt_qwen2b.yaml --seeds 0:200 \\
      --engines interp,circuit --check
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import pathlib
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import kernelgen  # noqa: E402

REFUSED_CODES = {"unsupported", "limit-exceeded"}


def u32_list(values) -> list[int]:
    return [v & kernelgen.MASK for v in values]


class Engines:
    def __init__(self, host: str, config: str, check: bool, dtype: str, workdir: pathlib.Path):
        self.host, self.config, self.check, self.dtype, self.workdir = host, config, check, dtype, workdir
        self.generated_tokens = collections.Counter()
        self.seconds = collections.Counter()

    def run(self, engine: str, cases: list[dict]) -> list[dict]:
        """One `qgpu-host batch` over `cases` ({"name", "cuda", "grid", "block", "args"}); a result dict per case."""
        lines = []
        for case in cases:
            path = self.workdir / f"{case['name']}.cu"
            path.write_text(case["cuda"])
            lines.append(json.dumps({"file": str(path), "kernel": "k", "grid": str(case["grid"]),
                                     "block": str(case["block"]), "args": case["args"]}))
        batch = self.workdir / f"batch_{engine}.jsonl"
        batch.write_text("\n".join(lines) + "\n")
        cmd = [self.host, "--config", self.config, "batch", str(batch), "--engine", engine]
        if engine != "interp":
            cmd += ["--dtype", self.dtype] + (["--check"] if self.check else [])
        t0 = time.monotonic()
        proc = subprocess.run(cmd, capture_output=True, text=True)
        self.seconds[engine] += time.monotonic() - t0
        results = {}
        for text in proc.stdout.splitlines():
            try:
                r = json.loads(text)
            except json.JSONDecodeError:
                continue
            results[r.get("line")] = r
        out = []
        for i, _ in enumerate(cases):
            r = results.get(i + 1)
            if r is None:  # the process died before answering this line
                tail = " ".join(proc.stderr.strip().splitlines()[-2:])
                r = {"error": {"code": "crash", "message": f"exit {proc.returncode}: {tail}"}}
            self.generated_tokens[engine] += r.get("tokens", {}).get("generated", 0)
            out.append(r)
        return out


def verdict(result: dict, expected: dict, engine: str) -> tuple[str, str]:
    """("ok" | "refused" | "fail", detail)."""
    if "error" in result:
        code, message = result["error"]["code"], result["error"]["message"]
        if code in REFUSED_CODES and "--check" not in message:
            return "refused", reason_of(message)
        return "fail", f"{engine}: {code}: {message}"
    if "check" in result and not result["check"]["ok"]:
        return "fail", f"{engine}: --check: {result['check']['summary']}"
    for name in ("out", "acc"):
        got = u32_list(result["arrays"].get(name, []))
        if got != expected[name]:
            first = next((i for i, (g, e) in enumerate(zip(got, expected[name])) if g != e), min(len(got), len(expected[name])))
            return "fail", (f"{engine}: {name}[{first}] = {got[first] if first < len(got) else 'missing'}, "
                            f"expected {expected[name][first] if first < len(expected[name]) else 'missing'}")
    return "ok", ""


def fault_verdict(result: dict, interp: dict, engine: str) -> tuple[str, str]:
    """--faults: the interpreter's error, word for word, or (no fault) its arrays."""
    if "error" in interp:
        want = interp["error"]
        if "error" not in result:
            return "fail", f"{engine}: ran to the end where the interpreter stopped: {want['message']}"
        if result["error"] != want:
            return "fail", f"{engine}: {result['error']['message']} (the interpreter: {want['message']})"
        return "ok", ""
    if "error" in result:
        return "fail", f"{engine}: {result['error']['code']}: {result['error']['message']}"
    if "check" in result and not result["check"]["ok"]:
        return "fail", f"{engine}: --check: {result['check']['summary']}"
    if result["arrays"] != interp["arrays"]:
        return "fail", f"{engine}: arrays differ from the interpreter's"
    return "ok", ""


def reason_of(message: str) -> str:
    """A refusal's message without its numbers and names: the limit it hit."""
    m = re.sub(r"^[^:]*\.cu:\d+(:\d+)?: (error: )?", "", message)
    m = re.sub(r"'[^']*'", "'…'", m)
    m = re.sub(r"\d+", "N", m)
    return m[:120]


def case_of(prog: kernelgen.Program, name: str) -> dict:
    return {"name": name, "cuda": prog.cuda(), "grid": prog.grid_text(), "block": prog.block_text(), "args": prog.args()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--host", required=True)
    ap.add_argument("--config", required=True)
    ap.add_argument("--seeds", default="0:50", help="A:B, the seeds A .. B-1")
    ap.add_argument("--engines", default="interp", help="comma-separated: interp, circuit, model")
    ap.add_argument("--check", action="store_true", help="circuit/model: token by token against the interpreter")
    ap.add_argument("--dtype", default="f32")
    ap.add_argument("--reduce", action="store_true", help="shrink each failing program")
    ap.add_argument("--save", help="write each (reduced) failure here as a regression case")
    ap.add_argument("--replay", help="run the regression cases of this directory instead of seeds")
    ap.add_argument("--workdir", help="where the kernels and batch files go (default: a temporary directory)")
    ap.add_argument("--max-block-executions", type=int, default=0,
                    help="model engines only for the programs that took at most this many block executions on "
                         "the interpreter (which then runs first): short launches for CI; 0: all")
    ap.add_argument("--faults", action="store_true",
                    help="one load of each program may fault (kernelgen.with_fault): every engine must stop with "
                         "the interpreter's error, or give its arrays where it does not fault")
    ap.add_argument("--max-refused", type=float, default=1.0,
                    help="fail when more than this fraction of the programs is refused (the generator must stay "
                         "inside the machine)")
    a = ap.parse_args()

    engines_wanted = [e for e in a.engines.split(",") if e]
    tmp = tempfile.TemporaryDirectory(prefix="qgpu-random-")
    workdir = pathlib.Path(a.workdir or tmp.name)
    workdir.mkdir(parents=True, exist_ok=True)
    eng = Engines(a.host, a.config, a.check, a.dtype, workdir)
    t0 = time.monotonic()

    if a.replay:
        cases, expected = [], []
        for f in sorted(pathlib.Path(a.replay).glob("*.json")):
            c = json.loads(f.read_text())
            cu = f.with_suffix(".cu")
            cases.append({"name": f.stem, "cuda": cu.read_text(), "grid": c["grid"], "block": c["block"],
                          "args": c["args"]})
            expected.append({k: u32_list(v) for k, v in c["expected"].items()})
        progs = [None] * len(cases)
    else:
        lo, hi = (int(x) for x in a.seeds.split(":"))
        progs = [kernelgen.generate(s) for s in range(lo, hi)]
        if a.faults:
            progs = [kernelgen.with_fault(p) for p in progs]
        cases = [case_of(p, f"seed{p.seed}") for p in progs]
        expected = [None if a.faults else {k: u32_list(v) for k, v in p.expected().items()} for p in progs]
    if not cases:
        print("differential: no programs", file=sys.stderr)
        return 2

    refused = collections.Counter()
    failures = []
    ok = collections.Counter()
    if a.max_block_executions and "interp" in engines_wanted:
        engines_wanted = ["interp"] + [e for e in engines_wanted if e != "interp"]
    chosen = list(range(len(cases)))  # the cases the model engines run
    interp_results = {}  # --faults: the interpreter's result is the reference
    faulted = 0
    for engine in engines_wanted:
        which = list(range(len(cases))) if engine == "interp" else chosen
        for i, r in zip(which, eng.run(engine, [cases[j] for j in which])):
            if a.faults:
                if engine == "interp":
                    interp_results[i] = r
                    fault = r.get("error", {}).get("code") == "invalid-argument" and \
                        re.search(r": (misaligned|out-of-bounds) (global|shared) ", r["error"]["message"])
                    faulted += bool(fault)
                    if "error" in r and not fault:
                        chosen.remove(i)
                        if r["error"]["code"] in REFUSED_CODES:
                            refused[reason_of(r["error"]["message"])] += 1
                        else:
                            failures.append((i, engine, f"interp: {r['error']['code']}: {r['error']['message']}"))
                    else:
                        ok[engine] += 1
                    continue
                v, detail = fault_verdict(r, interp_results[i], engine)
                if v == "ok":
                    ok[engine] += 1
                else:
                    failures.append((i, engine, detail))
                continue
            if engine == "interp" and a.max_block_executions and "error" not in r and \
                    r.get("stats", {}).get("block_executions", a.max_block_executions + 1) > a.max_block_executions:
                chosen.remove(i)
            v, detail = verdict(r, expected[i], engine)
            if engine == "interp" and v != "ok" and i in chosen:
                chosen.remove(i)  # refused or wrong already: the model engines would say the same
            if v == "ok":
                ok[engine] += 1
            elif v == "refused" and a.replay:  # a saved case runs: refusing it is a regression
                failures.append((i, engine, f"{engine}: refused: {r['error']['message']}"))
            elif v == "refused":
                if engine == engines_wanted[0]:
                    refused[detail] += 1
            else:
                failures.append((i, engine, detail))

    for i, engine, detail in failures:
        print(f"FAIL {cases[i]['name']} ({engine}): {detail}")
        prog = progs[i]
        if prog is not None and a.reduce:
            def still_fails(candidate: kernelgen.Program) -> bool:
                r = eng.run(engine, [case_of(candidate, f"reduce{candidate.seed}")])[0]
                exp = {k: u32_list(v) for k, v in candidate.expected().items()}
                return verdict(r, exp, engine)[0] == "fail"
            prog = kernelgen.reduce(prog, still_fails)
            print(f"  reduced to:\n{prog.cuda()}")
        if prog is not None and a.save:
            d = pathlib.Path(a.save)
            d.mkdir(parents=True, exist_ok=True)
            name = f"seed{prog.seed}_{engine}"
            (d / f"{name}.cu").write_text(prog.cuda())
            (d / f"{name}.json").write_text(json.dumps(
                {"seed": prog.seed, "grid": prog.grid_text(), "block": prog.block_text(), "args": prog.args(),
                 "expected": prog.expected(), "found": detail}, indent=1) + "\n")
            print(f"  saved {d / name}.cu")

    n = len(cases)
    n_refused = sum(refused.values())
    if a.faults:
        print(f"differential --faults: {faulted} of {n} programs fault in the interpreter")
    print(f"differential: {n} programs, {n - n_refused} launched, {n_refused} refused by the machine, "
          f"{len(failures)} failures; " +
          ", ".join(f"{e} {ok[e]} exact" + ("" if e == "interp" else f" of {len(chosen)}") for e in engines_wanted) +
          "".join(f"; {e}: {eng.generated_tokens[e]} generated tokens in {eng.seconds[e]:.0f} s"
                  for e in engines_wanted if e != "interp") +
          f"; {time.monotonic() - t0:.0f} s")
    for reason, count in refused.most_common(8):
        print(f"  refused {count}: {reason}")
    if failures:
        return 1
    if n_refused > a.max_refused * n:
        print(f"differential: {n_refused} of {n} programs refused (more than --max-refused {a.max_refused})",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
