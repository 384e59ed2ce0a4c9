#!/usr/bin/env python3
"""Runs `qgpu-host chat --json` with forced assistant turns and checks its tool calls.

    check_chat.py EXPECT.json INPUT -- QGPU-HOST ARGS...

INPUT is the user's side (stdin). EXPECT.json lists the calls in order as [tool, ok, regex on
the response]. Also checked: the exit code is 0, every call's response is the tool turn that
follows it in the transcript (what the model was given), and every call has an assistant turn
with the call before it.
"""
import json
import re
import subprocess
import sys


def fail(message, out="", err=""):
    print(f"FAIL: {message}")
    if out:
        print("--- stdout ---\n" + out[-4000:])
    if err:
        print("--- stderr ---\n" + err[-4000:])
    sys.exit(1)


def main():
    if len(sys.argv) < 5 or sys.argv[3] != "--":
        sys.exit("usage: check_chat.py EXPECT.json INPUT -- QGPU-HOST ARGS...")
    expect = json.load(open(sys.argv[1]))["calls"]
    with open(sys.argv[2]) as stdin:
        run = subprocess.run(sys.argv[4:], stdin=stdin, capture_output=True, text=True)
    if run.returncode != 0:
        fail(f"exit code {run.returncode}", run.stdout, run.stderr)
    try:
        transcript = json.loads(run.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError) as e:
        fail(f"stdout's last line is not JSON ({e})", run.stdout, run.stderr)
    calls, turns = transcript["calls"], transcript["turns"]
    if len(calls) != len(expect):
        fail(f"{len(calls)} calls, expected {len(expect)}: {[c['tool'] for c in calls]}", run.stdout, run.stderr)
    for i, (call, (tool, ok, pattern)) in enumerate(zip(calls, expect)):
        where = f"call {i + 1} ({tool})"
        if call["tool"] != tool or call["ok"] != ok:
            fail(f"{where}: got tool {call['tool']!r} ok={call['ok']}, response {call['response']!r}")
        if not re.search(pattern, call["response"]):
            fail(f"{where}: response {call['response']!r} does not match /{pattern}/")
        t = call["turn"]
        if turns[t]["role"] != "assistant" or turns[t + 1] != {"role": "tool", "content": call["response"]}:
            fail(f"{where}: the transcript does not hold the call at turn {t} and its response after it")
        if tool != "(malformed)" and [c["name"] for c in turns[t].get("tool_calls", [])] != [tool]:
            fail(f"{where}: the assistant turn does not carry the call")
    print(f"ok: {len(calls)} calls as expected, {len(turns)} turns")


if __name__ == "__main__":
    main()
