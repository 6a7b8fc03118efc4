"""Where each rank's collectives came from: per (rank, process group, op), the sites that
launched them, each ``(phase, call, line)`` with its count and bytes.

The hook names the ``call``, the ``line`` and, from the stack, the phase
(:mod:`perftop.hook.coll_origin`: forward, backward, optimizer, data, or ""). Here the
rank's steps decide the rest, by the collective's time: outside every step of the rank
(setup, an evaluation, a checkpoint, logging between steps) it is ``between``, unless its
stack names a backward or an optimizer step: those are training, which no interval holds
(the hook ends one at either), so such a record outside its rank's steps lies in a step
whose span the clock reads did not catch whole (a spawned rank on a loaded host read one
backward's all-reduce of 400 "between"), and the stack's phase stands; inside a
step, launched by the training thread with no phase on its stack (the user's own code: a
metric's ``all_reduce``, a ``barrier`` before logging) it is ``step``; from another
thread with none (CUDA autograd's, where DDP's reducer runs on a GPU), it stays "". A record waits for its rank's step to end
before it is placed; a rank with no steps keeps the stack's phase. A pure reducer.
"""

from __future__ import annotations

import bisect
from collections import deque
from typing import Any

from perftop.model.comm_rows import CollSite

MAX_PENDING = 8192  # records of a rank waiting for its step to end
MAX_SITES = 32  # sites per (rank, pg, op): past that, a site's line is dropped
BETWEEN, STEP = "between", "step"
TRAINING = frozenset(("backward", "optimizer"))  # phases no interval between steps holds


class Sites:
    def __init__(self) -> None:
        # pid -> (t, pg, op, bytes, call, phase, line, training thread), oldest first
        self.pending: dict[int, deque[tuple[Any, ...]]] = {}
        # (pid, pg, op) -> (phase, call, line) -> [count, bytes]
        self.counts: dict[tuple[int, str, str], dict[tuple[str, str, str], list[int]]] = {}

    def add(self, pid: int, pg: str, op: str, nb: int, t: float, th: Any, origin: Any) -> None:
        call, phase, line = (str(x) for x in origin) if len(origin) == 3 else ("", "", "")
        d = self.pending.setdefault(pid, deque())
        d.append((t, pg, op, nb, call, phase, line, bool(th)))
        if len(d) > MAX_PENDING:  # a rank whose steps never end: the stack's phase stands
            self._count(pid, d.popleft(), None)

    def resolve(
        self, steps: dict[int, Any], ended: bool, first: dict[int, float] | None = None
    ) -> None:
        """Place the records whose rank's step has ended (all of them once the run ended).
        ``first``: each rank's first step's start. A record after it but before the oldest
        step still kept (its span dropped: a spawned rank's first hundreds of steps, before
        its world size was known, on a loaded host) is not placed "between": the stack's
        phase stands."""
        for pid, d in self.pending.items():
            got = steps.get(pid)
            if not d or (not got and not ended):
                continue
            last = got[-1][1] if got else float("inf")
            if not ended and d[0][0] > last:
                continue
            st: list[Any] = []  # the steps from the one the oldest record may be in
            for x in reversed(got or ()):
                st.append(x)
                if x[0] <= d[0][0]:
                    break
            st.reverse()
            starts = [x[0] for x in st]
            dropped = (first or {}).get(pid, float("inf"))
            while d and (ended or d[0][0] <= last):
                rec = d.popleft()
                if st and dropped <= rec[0] < starts[0]:
                    self._count(pid, rec, None)  # its step's span is no longer kept
                else:
                    self._count(pid, rec, step_of(starts, st, rec[0]) is not None if st else None)

    def _count(self, pid: int, rec: tuple[Any, ...], inside: bool | None) -> None:
        _t, pg, op, nb, call, phase, line, th = rec
        if inside is not None:
            if inside:
                phase = phase or (STEP if th else "")
            elif phase not in TRAINING:
                phase = BETWEEN
        sites = self.counts.setdefault((pid, pg, op), {})
        key = (phase, call, line)
        if key not in sites and len(sites) >= MAX_SITES:
            key = (phase, call, "")
        c = sites.setdefault(key, [0, 0])
        c[0] += 1
        c[1] += nb

    def rows(self, pid: int, pg: str, op: str) -> tuple[CollSite, ...]:
        sites = self.counts.get((pid, pg, op), {})
        return tuple(
            CollSite(phase, call, line, c[0], c[1])
            for (phase, call, line), c in sorted(sites.items(), key=lambda x: -x[1][0])
        )


def step_of(starts: list[float], steps: Any, t: float) -> int | None:
    """The index in ``steps`` ((t0, t1) in order; ``starts`` their t0) of the step that
    holds time ``t``, or None."""
    i = bisect.bisect_right(starts, t) - 1
    if i < 0 or t > steps[i][1]:
        return None
    return i
