"""How often a sampled sync rate's stated error covers the exact rate: a campaign over
loops whose sync lines run on some steps only (a log every P steps, on the first k
iterations, both, every step, or on a random share of the steps), each watched as the hook's ``Sampler`` draws its steps
(a fresh session seed per loop, as ``perftop run`` sets one) and reduced by the model's
``SyncReducer``, against the exact rate of the same loop.

    python benchmarks/sync_coverage.py [--loops 600] [--seed 1]

Prints, per loop shape and overall: the loops whose line no watched step held (no row:
nothing to cover), the loops with a row, the share of those whose rate lies within 1, 2
and 3 stated errors of the exact rate, and the median relative error.
"""

from __future__ import annotations

import argparse
import random
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from perftop.events import SyncBatch, SyncInfo
from perftop.hook.sync_sampler import Sampler
from perftop.model.sync import SyncReducer

SITE = ("item", "loop.py", 9, "f", "potential")
LENGTHS = (8, 12, 30, 60, 150, 400, 1000, 3000, 20000)


def shape(rng: random.Random) -> tuple[str, Callable[[int], int]]:
    kind = rng.choice(["periodic", "first_k", "periodic+first_k", "every", "chance"])
    period, k, n = (
        rng.choice([2, 3, 5, 10, 25, 50, 100, 250]),
        rng.randint(1, 6),
        rng.choice([1, 1, 2, 5]),
    )
    phase = rng.randrange(period)
    if kind == "periodic":
        return kind, lambda i: n * (i % period == phase)
    if kind == "first_k":
        return kind, lambda i: n * (i <= k)
    if kind == "every":
        return kind, lambda i: n
    if kind == "chance":  # on a random share of the steps (a branch taken at random)
        share, draw = rng.choice([0.35, 0.5, 0.85, 0.95]), random.Random(rng.random()).random
        on = [draw() < share for _ in range(max(LENGTHS))]
        return kind, lambda i: n * on[i]
    return kind, lambda i: n * (i <= k or i % period == 0)


def estimate(steps: int, line: Callable[[int], int], seed: int) -> tuple[float, float] | None:
    """The rate and its stated error, as a session reads them; None: no watched step
    held the line (no row, no rate to cover)."""
    red = SyncReducer()
    red.apply(SyncInfo(0.0, 1, False, True, 3, 200, False, False))
    sampler = Sampler(3, 200, 1e-6, fixed=True, seed=seed)
    watched, weight = False, 1.0
    for i in range(steps):
        if watched:
            c = line(i)
            sites = ((*SITE, c, None),) if c else ()
            red.apply(SyncBatch(1, i, True, sites, (), 0, weight))
        watched = sampler.closed(i, i * 1e-3, watched)
        weight = sampler.weight
    red.apply_steps([(1, i, 0.0, 0.0, 0.0, 0.0, 0.0, 0) for i in range(steps)])
    rows = red.rows()
    return (rows[0].per_step, rows[0].error or 0.0) if rows else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--loops", type=int, default=600)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    by: dict[str, list[tuple[float, float, float]]] = {}
    unseen: dict[str, int] = {}
    for _ in range(args.loops):
        kind, line = shape(rng)
        steps = rng.choice(LENGTHS)
        exact = sum(line(i) for i in range(1, steps)) / (steps - 1)
        if exact == 0:
            continue
        got = estimate(steps, line, rng.getrandbits(64))
        if got is None:
            unseen[kind] = unseen.get(kind, 0) + 1
            continue
        by.setdefault(kind, []).append((*got, exact))
    by["all"] = [r for rows in list(by.values()) for r in rows]
    unseen["all"] = sum(unseen.values())
    head = f"{'shape':<18} {'unseen':>6} {'loops':>5} {'1 err':>6} {'2 err':>6} {'3 err':>6}"
    print(head + f" {'med rel':>8}")
    for kind, rows in by.items():
        cover = [
            sum(abs(r - x) <= m * e + 1e-12 for r, e, x in rows) / len(rows) for m in (1, 2, 3)
        ]
        rel = sorted(abs(r - x) / x for r, _, x in rows)[len(rows) // 2]
        print(
            f"{kind:<18} {unseen.get(kind, 0):>6} {len(rows):>5} "
            + " ".join(f"{c:>6.3f}" for c in cover)
            + f" {rel:>8.3f}"
        )


if __name__ == "__main__":
    main()
