#!/usr/bin/env python3
"""2-D and 3-D launches of tests/e2e/cuda/dims.cu against CUDA's dim3 numbering, computed here.

    check_dims.py KERNEL_FILE ENGINE -- QGPU-HOST --config CONFIG

ENGINE is interp, circuit or model; the model engines run the 3-D case and the transpose only, with
--check (every generated token equal to the interpreter's stream).

Runs `qgpu-host ... run KERNEL_FILE --kernel K --grid X,Y,Z --block X,Y,Z --engine ENGINE --json`
for each case below and compares every array with the reference: the indices each thread sees
(threads and blocks numbered with x fastest) and a rectangular transpose over a grid of 2-D
blocks that overhangs the matrix.
"""
import json
import subprocess
import sys


def indices(grid, block):
    (gx, gy, gz), (bx, by, bz) = grid, block
    out = [0] * (gx * gy * gz * bx * by * bz)
    for cz in range(gz):
        for cy in range(gy):
            for cx in range(gx):
                for tz in range(bz):
                    for ty in range(by):
                        for tx in range(bx):
                            b = cx + gx * (cy + gy * cz)
                            t = tx + bx * (ty + by * tz)
                            out[b * bx * by * bz + t] = tx + 10 * ty + 100 * tz + 1000 * cx + 10000 * cy + 100000 * cz
    return {"out": out, "sizes": [bx, by, bz, gx, gy, gz]}


def transpose(rows, cols):
    a = [(r * cols + c) * 3 - 20 for r in range(rows) for c in range(cols)]
    t = [a[r * cols + c] for c in range(cols) for r in range(rows)]
    return a, t


def dims(v):
    return ",".join(str(x) for x in v)


def main():
    if len(sys.argv) < 5 or sys.argv[3] != "--":
        sys.exit("usage: check_dims.py KERNEL_FILE ENGINE -- QGPU-HOST ARGS...")
    kernel_file, engine, host = sys.argv[1], sys.argv[2], sys.argv[4:]
    cases = []
    for grid, block in [((2, 1, 2), (3, 2, 2)), ((3, 2, 1), (5, 3, 1)), ((2, 2, 1), (4, 4, 1)), ((1, 3), (7,))]:
        grid, block = tuple(grid) + (1,) * (3 - len(grid)), tuple(block) + (1,) * (3 - len(block))
        expect = indices(grid, block)
        args = [f"out=zeros({len(expect['out'])})", "sizes=zeros(6)"]
        cases.append(("indices", grid, block, args, expect))
    rows, cols = 7, 6
    a, t = transpose(rows, cols)
    args = [f"in=[{','.join(map(str, a))}]", f"out=zeros({rows * cols})", f"rows={rows}", f"cols={cols}"]
    cases.append(("transpose", (2, 3, 1), (4, 3, 1), args, {"in": a, "out": t}))
    if engine != "interp":  # generated token by token: the 3-D case and the transpose only
        cases = [cases[0], cases[-1]]
    failures = 0
    for kernel, grid, block, args, expect in cases:
        command = host + ["run", kernel_file, "--kernel", kernel, "--grid", dims(grid), "--block", dims(block),
                          "--engine", engine, "--json"] + ([] if engine == "interp" else ["--check"])
        for arg in args:
            command += ["--arg", arg]
        run = subprocess.run(command, capture_output=True, text=True)
        name = f"{kernel} grid {dims(grid)} block {dims(block)}"
        if run.returncode != 0:
            print(f"FAIL {name}: exit {run.returncode}\n{run.stderr[-2000:]}")
            failures += 1
            continue
        result = json.loads(run.stdout.strip().splitlines()[-1])
        ok = result["arrays"] == expect and result["grid_dims"] == list(grid) and result["block_dims"] == list(block)
        print(("ok   " if ok else "FAIL ") + name)
        if not ok:
            print(f"  got      {result['arrays']} (grid_dims {result['grid_dims']}, block_dims {result['block_dims']})")
            print(f"  expected {expect}")
            failures += 1
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
