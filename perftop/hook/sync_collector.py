"""What a watched stretch's syncs become: the sites the detector saw, split at a step's end
into the step's own and those made between steps, sent as a ``SyncBatch``. Apart from
the detector (``sync_detect``) and the sampler: the one place the detector's sites are
kept, read by the step-end callback and by the exit (``sync.attach``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from perftop.events import SyncBatch
from perftop.hook.frames import Where

# op, kind, then where: (file, line, function, lib_file, lib_line, lib_function, package)
SiteKey = tuple[str, str, Where]


class Collector:
    """Syncs seen in a watched stretch (a step, and any time between steps inside it),
    each with the time it was seen; split at the step end into the step's own and those
    made between steps (inside the intervals the tracker reported: an evaluation or
    sampling pass). The training thread only appends to a list."""

    def __init__(self, put: Callable[[Any], None], pid: Callable[[], int]) -> None:
        self.put = put
        self.pid = pid
        self.log: list[tuple[float, SiteKey, int, float | None]] = []
        # kind, t0, where its syncs begin, t1 (perf_counter)
        self.gaps: list[tuple[str, float, float, float]] = []
        self.since = 0.0  # when the detector started: passes that began before are partial
        self.weight: Callable[[], float] = lambda: 1.0  # the watched step's (Sampler.weight)
        self.on_add: Callable[[float, float | None], None] | None = None  # (t, blocked_s)

    @property
    def counts(self) -> dict[SiteKey, int]:
        """Every site seen since the last flush, and its count."""
        out: dict[SiteKey, int] = {}
        for _, site, n, _ in self.log:
            out[site] = out.get(site, 0) + n
        return out

    def add(self, site: SiteKey, blocked_s: float | None = None, n: int = 1) -> None:
        t = time.perf_counter()
        self.log.append((t, site, n, blocked_s))
        if self.on_add is not None:
            self.on_add(t, blocked_s)

    def between(self, kind: str, t0: float, length: float, syncs_from: float = 0.0) -> None:
        """An interval outside training steps, as the tracker reports it; its syncs are
        those from ``syncs_from`` on, where that is later than ``t0`` (an evaluation's pass
        that its first batch opened: the syncs before that batch are the step's)."""
        t1 = t0 + length
        self.gaps.append((kind, t0, min(max(t0, syncs_from), t1), t1))

    def _take(self) -> tuple[dict[SiteKey, list[Any]], dict[SiteKey, list[Any]], int]:
        """The stretch's syncs since the last flush, split into a step's own and those
        inside the intervals between steps, and the passes it held whole (intervals other
        than checkpoints: a gap with both is reported as two); the log emptied."""
        log, gaps = self.log, self.gaps
        self.log, self.gaps = [], []
        inside: dict[SiteKey, list[Any]] = {}
        outside: dict[SiteKey, list[Any]] = {}
        for t, key, n, blocked in log:
            out = any(s0 <= t <= g1 for _, _, s0, g1 in gaps)
            acc = (outside if out else inside).setdefault(key, [0, None])
            acc[0] += n
            if blocked is not None:
                acc[1] = (acc[1] or 0.0) + blocked
        since = self.since
        passes = len({g0 for k, g0, _, _ in gaps if k != "checkpoint" and g0 >= since})
        return inside, outside, passes

    def flush(self, step: int, sampled: bool, put: Callable[[Any], None] | None = None) -> None:
        """The stretch's batch, to ``put`` where given (else sent)."""
        if not self.log and not sampled:
            self.gaps = []
            return
        inside, outside, passes = self._take()
        weight = self.weight() if sampled else 1.0
        (put or self.put)(
            SyncBatch(self.pid(), step, sampled, _sites(inside), _sites(outside), passes, weight)
        )

    def drop(self) -> None:
        """Forget what this stretch saw (a part of a step or of a pass: no whole one)."""
        self.log.clear()
        self.gaps.clear()

    def flush_pass(self, step: int) -> None:
        """A pass watched on its own draw (``sync_passes``) ended: its syncs, as no
        watched step's (a sync after it, the next step's wait for its batch, is dropped)."""
        _inside, outside, passes = self._take()
        self.put(SyncBatch(self.pid(), step, False, (), _sites(outside), passes))

    def flush_exit(self, step: int, watching: bool) -> None:
        """At exit: the syncs of passes after the last step (a final test), which no later
        step end flushes. Only those between steps go out, with no watched step: a stretch
        after the last step is no step, and the job's per-step rates stay as they were.
        ``watching``: the detector was on to the end (every step watched, or a watch that
        held the final pass), so a final pass with no sync was watched whole too, and is
        said to be (it read as "not watched: a watch has a budget" with PERFTOP_SYNC=all).
        The syncs after the last step outside any pass (the last iteration's log line, after
        its optimizer's step) go out apart, as a folded micro-batch's do: counted, in no
        rate (the HF Trainer's loss log read 5 of its 6 with PERFTOP_SYNC=all)."""
        inside, outside, passes = self._take()
        if outside or (watching and passes):
            self.put(SyncBatch(self.pid(), step, False, (), _sites(outside), passes))
        if inside:
            self.put(SyncBatch(self.pid(), step, False, _sites(inside)))


def _sites(acc: dict[SiteKey, list[Any]]) -> tuple[Any, ...]:
    sites = []
    for (op, kind, w), (n, blocked) in acc.items():
        site = (op, w[0], w[1], w[2], kind, n, blocked)
        sites.append(site if w[6] is None else (*site, *w[3:]))  # library detail
    return tuple(sites)
