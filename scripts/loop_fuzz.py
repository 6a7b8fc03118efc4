"""A long campaign of the loop-shape fuzzer (tests/zoo): ``--n`` loops drawn by hypothesis,
each run plainly, under ``perftop run --headless`` and in the exact mode, and checked by
the oracles. Prints a line per loop, then a summary table (loops, failures per oracle);
the failing loops' folders are kept under ``--out`` (loop.py, spec.txt, each run's count,
log and report) and their specs listed in ``--out``/failures.txt.

    python scripts/loop_fuzz.py --n 300 [--seed 29] [--out /tmp/zoo] [--avoid manual,grad]
    python scripts/loop_fuzz.py --n 24 --require explicit,val=grad_on   # only such loops
    python scripts/loop_fuzz.py --recheck --out /tmp/zoo   # the oracles again, no runs
"""

from __future__ import annotations

import argparse
import ast
import json
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hypothesis import HealthCheck, Phase, assume, given, seed, settings  # noqa: E402

from tests.zoo.accounting import ACCOUNTING  # noqa: E402
from tests.zoo.oracles import ORACLES, check, errors_off  # noqa: E402
from tests.zoo.parts import Spec, Sync, specs  # noqa: E402
from tests.zoo.run import Result, account_runs, run_spec  # noqa: E402


def campaign(
    n: int,
    at: int,
    out: Path,
    avoid: frozenset[str],
    odds: int,
    require: frozenset[str] = frozenset(),
) -> list[Result]:
    results: list[Result] = []
    t0 = time.monotonic()

    @seed(at)
    @settings(
        max_examples=n,
        deadline=None,
        database=None,
        phases=(Phase.generate,),
        suppress_health_check=list(HealthCheck),
    )
    @given(spec=specs(compile_odds=odds, avoid=avoid))
    def one(spec: Spec) -> None:
        assume(all(_has(spec, part) for part in require))
        folder = out / f"loop{len(results):04d}"
        shutil.rmtree(folder, ignore_errors=True)
        res = run_spec(spec, folder)
        results.append(res)
        verdict = "ok" if not res.failures else "FAIL " + ",".join(sorted(res.oracles()))
        took = time.monotonic() - t0
        print(f"[{len(results)}/{n} {took:.0f}s] {spec.update}/{spec.data}: {verdict}", flush=True)
        if res.failures:
            with (out / "failures.txt").open("a") as f:
                f.write(res.show() + "\n\n")
        else:
            for p in folder.glob("*.perftop*"):
                p.unlink()

    try:
        one()
    except KeyboardInterrupt:  # Ctrl-C: the summary of the loops run so far
        print(f"interrupted after {len(results)} loops", flush=True)
    return results


def _has(spec: Spec, part: str) -> bool:
    """``part``: a field that is set (``explicit``), or ``field=value`` (``val=grad_on``)."""
    name, eq, value = part.partition("=")
    got = getattr(spec, name)
    return str(got) == value if eq else bool(got)


def summary(results: list[Result]) -> str:
    rows = [f"{'oracle':<14} {'failed':>6}  what it checks"]
    for name, what in {**ORACLES, **ACCOUNTING}.items():
        bad = sum(1 for r in results if name in r.oracles())
        rows.append(f"{name:<14} {bad:>6}  {what}")
    failed = sum(1 for r in results if r.failures)
    return "\n".join([f"loops: {len(results)}, failed: {failed}", *rows, coverage(results)])


def coverage(results: list[Result]) -> str:
    """How often the sampled rate's stated error covers the loop's own rate: the share of
    sampled lines (not made every step) within 1, 2 and 3 stated errors (a normal error:
    68%, 95%, 99.7%), and the lines no watched step saw (not reported)."""
    off: list[float | None] = []
    for r in results:
        try:
            own = json.loads((r.folder / "sampled.json").read_text())
            rep = json.loads((r.folder / "sampled.report.json").read_text())
        except (OSError, ValueError):
            continue  # not run, or failed before its report
        off += errors_off(own, rep)
    seen = [z for z in off if z is not None]
    if not seen:
        return f"stated error's coverage: no sampled line reported ({len(off)} not seen)"
    within = ", ".join(f"{k}: {sum(z <= k for z in seen) / len(seen):.1%}" for k in (1, 2, 3))
    return (
        f"stated error's coverage, {len(seen)} sampled lines reported: within {within} "
        f"(a normal error: 68%, 95%, 99.7%); worst {max(seen):.1f} errors off; "
        f"{len(off) - len(seen)} lines not seen by any watched step"
    )


def recheck(out: Path) -> list[Result]:
    """The oracles again on a campaign's kept runs (no run: the wall time is not checked),
    as after an oracle was corrected; rewrites ``out``/failures.txt."""
    results = []
    for folder in sorted(out.glob("loop[0-9]*")):
        if not (folder / "failures.txt").exists():
            continue  # a loop the campaign did not finish (interrupted)
        d = ast.literal_eval((folder / "spec.txt").read_text())
        spec = Spec(**{**d, "syncs": tuple(Sync(**x) for x in d["syncs"])})
        res = Result(spec, folder)
        kept = (folder / "failures.txt").read_text().splitlines()
        kept = [f for f in kept if f.startswith(("ran:", "wall_time:"))]  # not rechecked
        try:
            plain = json.loads((folder / "plain.json").read_text())
            runs = {}
            for mode in ("sampled", "exact"):
                if (folder / f"{mode}.report.json").exists():
                    own = json.loads((folder / f"{mode}.json").read_text())
                    rep = json.loads((folder / f"{mode}.report.json").read_text())
                    # the watched steps, from the recording when it ran (run.timeline)
                    tl = json.loads((folder / f"{mode}.events.json").read_text())
                    rep["_watched"] = tl["watched"]
                    runs[mode] = (own, rep)
        except (OSError, ValueError):
            res.failures = kept
        else:
            res.failures = kept + check(spec, plain, runs) + account_runs(spec, folder, runs)
        results.append(res)
    with (out / "failures.txt").open("w") as f:
        f.writelines(r.show() + "\n\n" for r in results if r.failures)
    return results


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=300, help="loops to draw (default 300)")
    ap.add_argument("--seed", type=int, default=29)
    ap.add_argument("--out", type=Path, default=Path("/tmp/perftop-zoo"))
    ap.add_argument("--avoid", default="", help="parts to leave out, comma-separated")
    ap.add_argument(
        "--require",
        default="",
        help="parts every loop has, comma-separated: a Spec field set, or field=value",
    )
    ap.add_argument("--recheck", action="store_true", help="check --out's runs again")
    ap.add_argument("--compile-odds", type=int, default=15, help="1 loop in N compiled")
    a = ap.parse_args()
    if a.n < 1:
        print("loop_fuzz: --n must be at least 1", file=sys.stderr)
        return 2
    if a.recheck and not a.out.is_dir():
        print(f"loop_fuzz: {a.out}: no campaign there", file=sys.stderr)
        return 2
    a.out.mkdir(parents=True, exist_ok=True)
    if a.recheck:
        results = recheck(a.out)
    else:
        (a.out / "failures.txt").write_text("")
        avoid = frozenset(x for x in a.avoid.split(",") if x)
        require = frozenset(x for x in a.require.split(",") if x)
        unknown = sorted({r.partition("=")[0] for r in require} - set(Spec.__dataclass_fields__))
        if unknown:
            print(f"loop_fuzz: --require: no part {', '.join(unknown)}", file=sys.stderr)
            return 2
        results = campaign(a.n, a.seed, a.out, avoid, a.compile_odds, require)
    text = summary(results)
    (a.out / "summary.txt").write_text(text + "\n")
    print(text)
    print(f"failing loops: {a.out / 'failures.txt'}")
    return 1 if any(r.failures for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
