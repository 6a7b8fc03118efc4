"""Which rank of a distributed job makes the others wait, from per-rank step figures.

Under DDP every rank's step takes the same time: the gradient all-reduce at the end of
``backward()`` makes the fast ranks wait for the slow one. Step time alone cannot name the
slow rank; what can is where the time goes. The straggler spends more time *outside*
backward (data wait, forward, optimizer: its own work) and less *in* backward, while every
other rank's backward is longer by about as much (the all-reduce wait). A pure function, so
the ``straggler`` hint, the ranks table and the report agree.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from perftop.model.snapshot import StepStats
from perftop.model.stats import median as _median

MIN_STEPS = 5  # fewer steps than this per rank say nothing yet
MIN_SHARE = 0.10  # the straggler's extra own work, as a share of the step, to be named
MIN_WAIT_SHARE = 0.5  # the others' extra backward must cover this much of it


@dataclass(frozen=True, slots=True)
class Straggler:
    """The rank that makes the others wait, and the measured evidence (seconds, medians)."""

    rank: int | None
    pid: int | None
    host: str
    own_s: float  # its median step time outside backward
    others_own_s: float  # the same for the other ranks (median over ranks)
    backward_s: float  # its median backward
    others_backward_s: float  # the others' median backward (holds their all-reduce wait)
    step_s: float  # median step time over ranks

    @property
    def extra_s(self) -> float:
        """How much more of its own work it does per step."""
        return self.own_s - self.others_own_s

    @property
    def wait_s(self) -> float:
        """How much longer the others sit in backward (waiting for it in all-reduce)."""
        return self.others_backward_s - self.backward_s

    def evidence(self, label: str) -> tuple[str, ...]:
        """Its measured evidence, the rank named ``label`` (Snapshot.rank_label)."""

        def ms(x: float) -> str:
            return f"{x * 1e3:.1f}ms"

        return (
            f"{label} spends {ms(self.extra_s)} more per step outside backward than the "
            f"other ranks ({ms(self.own_s)} vs {ms(self.others_own_s)}, medians)",
            f"the other ranks spend {ms(self.wait_s)} more in backward, waiting for it in the "
            f"gradient all-reduce ({ms(self.others_backward_s)} vs {ms(self.backward_s)})",
        )


def _ranked(ranks: Sequence[StepStats]) -> list[StepStats]:
    """The processes torchrun gave a rank (a collector may also hear unrelated jobs)."""
    return [r for r in ranks if r.rank is not None]


def _usable(ranks: Sequence[StepStats]) -> list[StepStats]:
    return [
        r
        for r in _ranked(ranks)
        if r.count >= MIN_STEPS and r.own_p50 is not None and "backward" in r.phase_p50
    ]


def find_straggler(ranks: Sequence[StepStats], min_share: float = MIN_SHARE) -> Straggler | None:
    """The rank whose extra own work the others pay for in backward, or None.

    Named only when its extra time outside backward is at least ``min_share`` of the step
    and the others' extra backward time covers at least ``MIN_WAIT_SHARE`` of it: ranks
    that do not synchronize (no DDP) differ without waiting, and are not stragglers.
    """
    rs = _usable(ranks)
    if len(rs) < 2:
        return None
    slow = max(rs, key=lambda r: r.own_p50 or 0.0)
    others = [r for r in rs if r is not slow]
    others_own = _median([r.own_p50 or 0.0 for r in others]) or 0.0
    others_bwd = _median([r.phase_p50["backward"] for r in others]) or 0.0
    step = _median([r.p50 for r in rs if r.p50 is not None]) or 0.0
    s = Straggler(
        rank=slow.rank,
        pid=slow.pid,
        host=slow.host,
        own_s=slow.own_p50 or 0.0,
        others_own_s=others_own,
        backward_s=slow.phase_p50["backward"],
        others_backward_s=others_bwd,
        step_s=step,
    )
    if step <= 0 or s.extra_s < min_share * step or s.wait_s < MIN_WAIT_SHARE * s.extra_s:
        return None
    return s


def slowest(ranks: Sequence[StepStats]) -> StepStats | None:
    """The rank to mark as slowest: the straggler when there is one, else the one with the
    longest median step, if it is 10% over the fastest (else none stands out)."""
    if len(ranks) < 2:
        return None
    s = find_straggler(ranks)
    if s is not None:
        return next(r for r in ranks if r.pid == s.pid and r.host == s.host)
    timed = [r for r in _ranked(ranks) if r.p50 is not None]
    if len(timed) < 2:
        return None
    hi = max(timed, key=lambda r: r.p50 or 0.0)
    lo = min(timed, key=lambda r: r.p50 or 0.0)
    return hi if (hi.p50 or 0.0) > 1.1 * (lo.p50 or 0.0) else None
