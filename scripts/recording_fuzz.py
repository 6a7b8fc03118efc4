"""A campaign of the recording fuzzer (tests/recfuzz.py): ``--n`` recordings drawn by
hypothesis from ``--seed``, each read by the in-process oracles and by ``perftop report``
(and ``export``, ``diff`` with ``--all``) in a subprocess, whose exit code must be 0 or 3,
with no traceback, within ``--limit`` seconds. Prints the failures, then one summary line:
recordings, failures, the slowest read, the largest child RSS. Failing recordings are kept
under ``--out``.

    python scripts/recording_fuzz.py --n 150 [--seed 43] [--out /tmp/recfuzz] [--all]
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hypothesis import HealthCheck, given, seed, settings  # noqa: E402

from tests.recfuzz import check, recordings  # noqa: E402


def commands(p: Path, every: bool) -> list[list[str]]:
    out = [["report", "--json", str(p)]]
    if every:
        out += [["export", "--csv", str(p.with_suffix(".csv.d")), str(p)], ["diff", str(p), str(p)]]
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=150)
    ap.add_argument("--seed", type=int, default=43)
    ap.add_argument("--out", type=Path, default=Path("/tmp/recfuzz"))
    ap.add_argument("--limit", type=float, default=60.0)
    ap.add_argument("--all", action="store_true", help="also export and diff each recording")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    stats: dict[str, Any] = {"n": 0, "failures": 0, "slowest": 0.0, "slowest_what": ""}

    @seed(args.seed)
    @settings(
        max_examples=args.n,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(rec=recordings())
    def one(rec: tuple[bytes, list[int]]) -> None:
        data, kept = rec
        i = stats["n"] = stats["n"] + 1
        p = args.out / f"r{i}.perftop"
        p.write_bytes(data)
        problems = []
        found = check(p, kept, args.limit)
        if found:
            problems.append(f"oracle: {found}")
        for cmd in commands(p, args.all):
            t = time.monotonic()
            try:
                r = subprocess.run(
                    [sys.executable, "-m", "perftop", *cmd], capture_output=True, text=True,
                    timeout=args.limit, cwd=args.out, stdin=subprocess.DEVNULL,
                )  # fmt: skip
            except subprocess.TimeoutExpired:
                problems.append(f"{cmd[0]}: over {args.limit} s")
                continue
            took = time.monotonic() - t
            if took > stats["slowest"]:
                stats["slowest"], stats["slowest_what"] = took, f"{cmd[0]} {p.name}"
                p.with_suffix(".slowest").write_bytes(data)
            if r.returncode not in (0, 3) or "Traceback" in r.stderr:
                problems.append(f"{cmd[0]}: exit {r.returncode}: {r.stderr.strip()[-200:]}")
        if problems:
            stats["failures"] += 1
            print(f"{p} ({len(data)} bytes): " + "; ".join(problems), flush=True)
        else:
            p.unlink()

    one()
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss >> 10
    print(
        f"recordings {stats['n']}, failures {stats['failures']}, slowest command "
        f"{stats['slowest']:.2f} s ({stats['slowest_what']}), largest child RSS {rss} MiB (seed {args.seed})"
    )
    return 1 if stats["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
