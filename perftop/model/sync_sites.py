"""The sums kept for each sync site, the standard errors made of them, and the rows they
end up as: the arithmetic under :class:`~perftop.model.sync.SyncReducer`, kept apart from
the reducer's bookkeeping of steps, weights and processes (see :mod:`perftop.model.sync`
for what the rates and errors mean).
"""

from __future__ import annotations

import math
from typing import Any

from perftop.model.finding_rows import SyncSite

ALL_SEEN = 0.0027  # a normal's tail beyond three standard errors, both sides (_unseen)


class _Acc:
    __slots__ = ("count", "blocked", "last_step", "sampled", "wc", "w2c", "w2c2", "seen",
                 "early", "rwc", "rwc2", "rw2c", "rw2c2")  # fmt: skip

    def __init__(self) -> None:
        self.count = 0
        self.blocked: float | None = None
        self.last_step: int | None = None
        self.sampled = False
        self.wc = self.w2c = self.w2c2 = 0.0  # sums over sampled steps of w c, w² c, w² c²
        self.seen = 0  # sampled steps it was seen in
        self.early = 0  # its count in the steps watched for sure (weight 1)
        # sums over the drawn steps (weight > 1) of w c, w c², w² c, w² c²
        self.rwc = self.rwc2 = self.rw2c = self.rw2c2 = 0.0

    def add(self, step: int, sampled: bool, count: int, blocked: float | None, w: float) -> None:
        self.count += count
        if sampled:
            self.sampled = True
            self.seen += 1
            self.wc += w * count
            self.w2c += w * w * count
            self.w2c2 += w * w * count * count
            if w == 1.0:
                self.early += count
            else:
                self.rwc += w * count
                self.rwc2 += w * count * count
                self.rw2c += w * w * count
                self.rw2c2 += w * w * count * count
        if blocked is not None:
            self.blocked = (self.blocked or 0.0) + blocked * (w if sampled else 1.0)
        if self.last_step is None or step > self.last_step:
            self.last_step = step


def _error(
    w: float, w2: float, wc: float, w2c: float, w2c2: float, r: float, floor: bool = True
) -> float:
    """A ratio's standard error (sums over its steps of w, w², w c, w² c, w² c²): the
    linearized one of the weighed mean, but (``floor``) never below a Poisson count's over
    the effective number of watched steps (Kish's ``w² / w2``), with one pseudo-count: a
    line seen in none, or all, of a few heavy samples is no surer for that."""
    lin = max(0.0, w2c2 - 2 * r * w2c + r * r * w2) / (w * w)
    n = w * w / w2
    return math.sqrt(max(lin, (r + 1 / n) / n if floor else 0.0))


def _unseen(n: int) -> float:
    """The error of a site seen in each of ``n`` drawn steps, as a share of its
    rate: one that misses a share q of steps is seen in all n with chance (1 - q)^n, so n
    sightings rule out only the q beyond where that falls under :data:`ALL_SEEN` (the tail
    beyond three standard errors), and a third of that q is one error (a line on 56% of a
    loop's steps, seen in 4 drawn ones, read "every step ×1.00" with an error of 0)."""
    return (1.0 - ALL_SEEN ** (1.0 / n)) / 3.0 if n >= 1 else 1.0


def _place(r: SyncSite) -> tuple[Any, ...]:
    if r.lib_file is not None:  # a library line, whichever user lines reached it
        return (r.lib_file, r.lib_line)
    return (r.file, r.line, r.lib_file, r.lib_line)


def _cost(r: SyncSite) -> tuple[Any, ...]:
    """Most costly first: measured waits, then real syncs, then the most frequent."""
    return (-(r.blocked_s or 0.0), r.kind != "sync", -r.per_step, r.file, r.line, r.op)


def _site(
    key: tuple[Any, ...],
    count: int,
    per_step: float,
    blocked: float | None,
    last_step: int | None,
    callers: dict[tuple[str, int, str], int] | None = None,
    **extra: Any,
) -> SyncSite:
    """A row from a site's key ``(op, file, line, function, kind, *library detail)``; an
    older recording's key carries fewer library fields (or none). A library site's key
    has no user line: its ``callers`` (user lines and their counts) name it."""
    op, file, line, function, kind, *lib = key
    lib_file, lib_line, lib_function, package = (*lib, None, None, None, None)[:4]
    if callers:  # the most frequent user line first: the row's own
        ranked = sorted(callers.items(), key=lambda kv: (-kv[1], kv[0]))
        file, line, function = ranked[0][0]
        extra["callers"] = tuple((f, n, fn, c) for (f, n, fn), c in ranked)
    return SyncSite(
        op, file, line, function, kind, count, per_step, blocked, last_step,
        lib_file, lib_line, lib_function, package, **extra,
    )  # fmt: skip
