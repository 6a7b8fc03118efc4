"""Which steps the sync detector watches: a draw per step, with a known probability, from a
hash of the step index and the session's seed (the same steps on every rank). Apart from
the detector and its wiring (``sync.attach``): plain arithmetic on step indices and
durations, with no torch and no tensor in it.
"""

from __future__ import annotations

import hashlib
import math
import os

from perftop.hook.state import env_int

# What sampling may cost a step, amortized: 0.15 µs (0.1% of a tight 165 µs CPU step,
# where the hook's whole cost is meant to stay under 3 µs; at 0.5 µs, sampling cost that
# step ~0.9 µs whole process, a third of it) ...
BUDGET_S = 0.15e-6
FRACTION = 0.001  # ... or this fraction of a step, whichever is more
WARM = 4  # steps before a sample that go through the sampler, to learn the base duration


M64 = (1 << 64) - 1


def unit(index: int, salt: int, seed: int = 0) -> float:
    """A number in [0, 1) drawn from the step index and the session's seed (splitmix64):
    the same on every rank, unrelated to any period of the job's own work, and another
    draw in each session."""
    h = (
        index * 0x9E3779B97F4A7C15 + salt * 0xD1B54A32D192ED03 + seed * 0xA0761D6478BD642F + 1
    ) & M64
    h = ((h ^ (h >> 30)) * 0xBF58476D1CE4E5B9) & M64
    h = ((h ^ (h >> 27)) * 0x94D049BB133111EB) & M64
    return ((h ^ (h >> 31)) >> 11) / 2**53


def session_seed() -> int:
    """The seed of the sampler's draws: ``PERFTOP_SYNC_SEED``, else one every rank of a
    distributed job derives from its rendezvous, else a random one."""
    text = os.environ.get("PERFTOP_SYNC_SEED", "").strip()
    try:
        return int(text, 16) & M64
    except ValueError:
        pass
    if (env_int("WORLD_SIZE", 1) or 1) > 1:
        keys = ("TORCHELASTIC_RUN_ID", "MASTER_ADDR", "MASTER_PORT")
        shared = "\0".join(os.environ.get(k, "") for k in keys).encode()
        return int.from_bytes(hashlib.sha256(shared).digest()[:8], "little")
    return int.from_bytes(os.urandom(8), "little")


class Sampler:
    """Which steps the detector watches: each step by a draw with a known probability,
    so that the per-step rates are unbiased whatever a line's period (a log line every 10
    steps, an image saved every 63).

    Step ``j`` is watched with probability ``p(j)``: 1 for steps 1..``early`` (sites are
    learnt at once), then ``(early / j)**2`` (a short run still gets a few samples) down
    to ``1 / gap``: ``gap`` is ``every``, or more when the measured cost of a sample needs
    it to keep the amortized cost within the budget. A watched step carries the weight
    ``1 / p(j)`` (:attr:`weight`, sent with its ``SyncBatch``): the model's rates are the
    weighed means (each watched step stands for the steps it was drawn among), so the
    early steps count as themselves only. All mode: every step, weight 1.

    The draws come from a hash of the step index and the session's ``seed`` (a geometric
    jump to the next watched step, thinned where ``p`` falls), never from the clock. ``fixed`` (a distributed job:
    ``WORLD_SIZE`` > 1): the gap is ``every`` whatever this rank's timings, so every rank
    watches the same steps; a sampled step on one rank would otherwise stall every rank
    at the next collective, and the job would pay about world size times the budget.
    """

    def __init__(
        self,
        early: int = 3,
        every: int = 200,
        budget_s: float = BUDGET_S,
        fixed: bool = False,
        seed: int = 0,
    ) -> None:
        self.early = early
        self.seed = seed & M64
        self.every = max(1, every)
        self.budget_s = budget_s
        self.fixed = fixed
        self.all = False
        self.prev: tuple[int, float] | None = None  # the last step closed: index, end
        self.base: float | None = None  # EMA of unwatched step durations
        self.floor = 1.0 / self.every  # the lowest probability of a watch, 1 / gap
        self.weight = 1.0  # of the step the last :meth:`closed` said is watched
        self.next_at, self.next_w = self.draw(early + 1)
        # Time spent in the per-step callback since the last sample (its own bookkeeping,
        # and stopping the detector): also paid for out of the budget.
        self.overhead_s = 0.0

    def p(self, index: int) -> float:
        """The probability that step ``index`` is watched."""
        if index <= self.early:
            return 1.0
        return min(1.0, max(self.floor, (self.early / index) ** 2))

    def draw(self, start: int) -> tuple[int, float]:
        """The first watched step from ``start`` on, and its weight."""
        j = start - 1
        while True:
            pmax = self.p(j + 1)  # p never grows with the index: thin from the next one's
            if pmax >= 1.0:
                j += 1
            else:
                u = 1.0 - unit(j, 1, self.seed)  # in (0, 1]
                j += 1 + int(math.log(u) / math.log1p(-pmax))
            pj = self.p(j)
            if pj >= pmax or unit(j, 2, self.seed) * pmax < pj:
                return j, 1.0 / pj

    def closed(self, index: int, t: float, watched: bool, primed: bool = False) -> bool:
        """Step ``index`` ended at ``t`` (``primed``: the detector learnt marks in it);
        is step ``index + 1`` watched?"""
        prev = self.prev
        dur = t - prev[1] if prev is not None and prev[0] == index - 1 else None
        self.prev = (index, t)
        if watched and index > self.early:  # the early samples run while torch warms up
            gap = self.every if self.fixed or dur is None else self.gap(dur)
            self.floor = 1.0 / gap
        elif primed:  # its extra time is the sample's, paid out of the same budget
            if dur is not None and self.base is not None:
                self.overhead_s += max(0.0, dur - self.base)
        elif dur is not None and not watched and index > 0:
            b = self.base
            self.base = dur if b is None else b + 0.1 * (dur - b)
        nxt = index + 1
        if self.all or nxt <= self.early:
            self.weight = 1.0
            return True
        if self.next_at < nxt:  # drawn and gone (watched, or passed while aside)
            self.next_at, self.next_w = self.draw(nxt)
        self.weight = self.next_w
        return nxt == self.next_at

    def primes(self, index: int) -> bool:
        """Whether step ``index + 1``, the one before a watched step, learns marks."""
        return not self.all and self.next_at == index + 2 and index + 2 > self.early

    def wake_at(self, index: int) -> int:
        """The next step whose end needs the callback (it decides the step after it, and
        primes the one before a watched step), a few steps earlier to learn the base
        duration unless the schedule is fixed."""
        if self.all or index + 2 < self.early:
            return index + 1
        return max(index + 1, self.next_at - 2 - (0 if self.fixed else WARM))

    def gap(self, watched_dur: float) -> int:
        base = self.base
        if base is None:
            return self.every
        extra = max(0.0, watched_dur - base) + self.overhead_s
        self.overhead_s = 0.0
        allowed = max(self.budget_s, FRACTION * base)
        return max(self.every, min(1_000_000, math.ceil(extra / allowed - 1e-9)))
