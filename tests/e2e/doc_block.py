#!/usr/bin/env python3
"""A generated block of a Markdown document must equal what a command prints now.

    doc_block.py [--write] DOC NAME -- CMD ARGS...

The block sits between the lines `<!-- generated: NAME -->` and `<!-- end: NAME -->`.
Without --write: exit 1 with a diff when they differ. With --write: replace the block.
"""
import difflib
import subprocess
import sys


def main(argv):
    write = argv[:1] == ["--write"]
    if write:
        argv = argv[1:]
    if len(argv) < 4 or argv[2] != "--":
        sys.exit("usage: doc_block.py [--write] DOC NAME -- CMD ARGS...")
    doc, name, cmd = argv[0], argv[1], argv[3:]
    begin, end = f"<!-- generated: {name} -->", f"<!-- end: {name} -->"
    with open(doc, encoding="utf-8") as f:
        lines = f.read().split("\n")
    try:
        b, e = lines.index(begin), lines.index(end)
    except ValueError:
        sys.exit(f"{doc}: no block between '{begin}' and '{end}'")
    if e < b:
        sys.exit(f"{doc}: '{end}' comes before '{begin}'")
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(f"{' '.join(cmd)}: exit {run.returncode}: {run.stderr.strip()}")
    now = run.stdout.rstrip("\n").split("\n")
    was = lines[b + 1:e]
    if now == was:
        print(f"{doc}: block '{name}' is up to date ({len(now)} lines)")
        return 0
    if write:
        with open(doc, "w", encoding="utf-8") as f:
            f.write("\n".join(lines[:b + 1] + now + lines[e:]))
        print(f"{doc}: block '{name}' rewritten ({len(now)} lines)")
        return 0
    sys.stdout.writelines(difflib.unified_diff([l + "\n" for l in was], [l + "\n" for l in now],
                                               f"{doc} ({name})", "now"))
    print(f"{doc}: block '{name}' differs from what the command prints; rewrite it with\n"
          f"  python3 tests/e2e/doc_block.py --write {doc} {name} -- {' '.join(cmd)}")
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
