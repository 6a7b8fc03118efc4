"""Writes ``tests/slow_first.txt`` from a full run's durations: each test file's time (its
tests' setup, call and teardown), longest first. The suite hands files to its workers in
that order (tests/conftest.py): a long file that starts last holds one worker while the
others idle, and the run waits for it.

    python -m pytest --durations=0 | tee run.log
    python scripts/slow_first.py run.log
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import defaultdict
from pathlib import Path

LINE = re.compile(r"^([0-9.]+)s (?:setup|call|teardown)\s+(\S+?)::")
OUT = Path(__file__).resolve().parent.parent / "tests" / "slow_first.txt"
MIN_S = 5.0  # files shorter than this go in collection order, after the listed ones
HEADER = """\
# Test files by their measured time in a full run (setup + call, longest first): the suite
# sends them to its workers in this order (tests/conftest.py), so that no long file starts
# last and holds one worker after the others are done. Refresh from
# `python -m pytest --durations=0` (scripts/slow_first.py); a file not listed goes after.
"""


def per_file(lines: list[str]) -> dict[str, float]:
    total: dict[str, float] = defaultdict(float)
    for line in lines:
        m = LINE.match(line)
        if m:
            total[m.group(2)] += float(m.group(1))
    return total


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("log", help="a pytest run's output, with --durations=0")
    args = ap.parse_args(argv)
    total = per_file(Path(args.log).read_text(errors="replace").splitlines())
    if not total:
        print(f"{args.log}: no durations in it (run pytest with --durations=0)", file=sys.stderr)
        return 1
    files = [f for f, s in sorted(total.items(), key=lambda kv: -kv[1]) if s >= MIN_S]
    OUT.write_text(HEADER + "".join(f + "\n" for f in files))
    print(
        f"{OUT}: {len(files)} files, {sum(total[f] for f in files):.0f} s of {sum(total.values()):.0f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
