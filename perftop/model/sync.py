"""Sync sites over a whole session: counts summed across steps and processes.

Rates divide by the steps that were actually watched: sampled steps for what the sampled
detector saw (real syncs too, since CUDA's debug mode is on in those steps only; older
recordings had it on every step of a process). Syncs made outside training steps in a
watched stretch (an evaluation or sampling pass) are kept apart, per pass watched. A line with a real sync
hides the same line's ``potential`` entry (it is the same wait, now measured), and lends
it the op name the detector knew when the debug mode could only say "sync", and the time
blocked the detector measured. A site is a user line together with the library line it
went through (if any): one user line reaching two library lines is two sites.

``blocked_s`` is per watched step: the host time measured inside the site's calls in the
sampled steps (on an accelerator only), divided by the sampled steps.

Each sampled step comes with its weight (1 / the probability it had of being watched, see
``hook.sync.Sampler``): a rate is the weighed mean of the watched steps' counts (a ratio
estimate, unbiased whatever a line's period), and its standard error the linearized one,
``sqrt(sum w²(c - r)²) / sum w``. In the exact mode (every step watched) the error is 0.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from perftop.events import Step, SyncBatch, SyncInfo
from perftop.model.snapshot import SyncSite
from perftop.wire import StepRecord

# op, file, line, function, kind, lib_file, lib_line, lib_function, package
_Key = tuple[str, str, int, str, str, str | None, int | None, str | None, str | None]
_NO_LIB = (None, None, None, None)  # sites recorded before the library fields existed


class _Acc:
    __slots__ = ("count", "blocked", "last_step", "sampled", "wc", "w2c", "w2c2", "seen")

    def __init__(self) -> None:
        self.count = 0
        self.blocked: float | None = None
        self.last_step: int | None = None
        self.sampled = False
        self.wc = self.w2c = self.w2c2 = 0.0  # sums over sampled steps of w c, w² c, w² c²
        self.seen = 0  # sampled steps it was seen in

    def add(self, step: int, sampled: bool, count: int, blocked: float | None, w: float) -> None:
        self.count += count
        if sampled:
            self.sampled = True
            self.seen += 1
            self.wc += w * count
            self.w2c += w * w * count
            self.w2c2 += w * w * count * count
        if blocked is not None:
            self.blocked = (self.blocked or 0.0) + blocked * (w if sampled else 1.0)
        if self.last_step is None or step > self.last_step:
            self.last_step = step


class SyncReducer:
    handles = (SyncInfo, SyncBatch, Step)

    def __init__(self) -> None:
        self.sites: dict[_Key, _Acc] = {}
        self.between: dict[_Key, _Acc] = {}
        self.debug_pids: set[int] = set()
        self.debug_steps = 0  # steps of processes whose every step the CUDA mode watched
        self.sampled_steps = 0
        self.w = self.w2 = 0.0  # sums of the sampled steps' weights, and of their squares
        self.exact_pids: set[int] = set()  # processes that watch every step
        self.sampled_pids: set[int] = set()
        self.passes = 0  # passes outside training steps that a watched stretch held whole
        self._sampled_seen: set[tuple[int, int]] = set()

    def apply(self, ev: Any) -> None:
        if isinstance(ev, Step):
            if ev.pid in self.debug_pids:
                self.debug_steps += 1
        elif isinstance(ev, SyncBatch):
            if ev.sampled and (ev.pid, ev.step) not in self._sampled_seen:
                self._sampled_seen.add((ev.pid, ev.step))
                self.sampled_steps += 1
                self.passes += ev.passes
                self.w += ev.weight
                self.w2 += ev.weight * ev.weight
                self.sampled_pids.add(ev.pid)
            for into, sites in ((self.sites, ev.sites), (self.between, ev.between)):
                for op, file, line, function, kind, count, *rest in sites:
                    lib = tuple(rest[1:5]) if len(rest) >= 5 else _NO_LIB
                    key = (op, file, line, function, kind, *lib)
                    acc = into.get(key)
                    if acc is None:
                        acc = into[key] = _Acc()
                    blocked = rest[0] if rest else None
                    acc.add(ev.step, ev.sampled, count, blocked, ev.weight)
        elif isinstance(ev, SyncInfo):
            if ev.cuda_debug:
                self.debug_pids.add(ev.pid)
            if ev.exact:
                self.exact_pids.add(ev.pid)

    def apply_steps(self, records: Sequence[StepRecord]) -> None:
        """Packed step records: as :meth:`apply` of each one's :class:`Step`."""
        if self.debug_pids:
            self.debug_steps += sum(1 for r in records if r[0] in self.debug_pids)

    def contribute(self, parts: dict[str, Any], window: int | None) -> None:
        parts["sync"] = self.rows()
        parts["sync_between"] = self.between_rows()

    def between_rows(self) -> tuple[SyncSite, ...]:
        """Syncs outside training steps, per pass over the passes watched whole (a site
        seen in a pass that began before the watch still counts, over at least one)."""
        out = []
        passes = self.passes
        for key, acc in self.between.items():
            n = max(passes, 1)
            blocked = acc.blocked / n if acc.blocked is not None else None
            out.append(
                _site(
                    key,
                    acc.count,
                    0.0,
                    blocked,
                    acc.last_step,
                    per_pass=acc.count / n,
                    passes=passes,
                )
            )
        out.sort(key=lambda r: (-(r.per_pass or 0.0), r.file, r.line, r.op))
        return tuple(out)

    def rows(self) -> tuple[SyncSite, ...]:
        real: list[SyncSite] = []
        potential: list[SyncSite] = []
        exact = self.sampled_pids <= self.exact_pids
        for key, acc in self.sites.items():
            if acc.sampled and self.w > 0:
                per_step = acc.wc / self.w
                est: dict[str, Any] = {
                    "watched": self.sampled_steps,
                    "error": 0.0 if exact else _error(self.w, self.w2, acc, per_step),
                    "seen": acc.seen,
                }
            else:
                steps = self.debug_steps
                per_step = acc.count / steps if steps else float(acc.count)
                est = {}
            blocked = None
            if acc.blocked is not None and self.w > 0:
                blocked = acc.blocked / self.w
            row = _site(key, acc.count, per_step, blocked, acc.last_step, **est)
            (real if row.kind == "sync" and not acc.sampled else potential).append(row)
        real_lines = {_place(r) for r in real}
        seen = {_place(r): r for r in potential}
        out = [r for r in potential if _place(r) not in real_lines]
        for r in real:
            p = seen.get(_place(r))
            if p is not None:
                r = replace(
                    r,
                    op=p.op if r.op == "sync" else r.op,
                    blocked_s=r.blocked_s if r.blocked_s is not None else p.blocked_s,
                )
            out.append(r)
        out.sort(key=_cost)
        return tuple(out)


def _error(w: float, w2: float, acc: _Acc, r: float) -> float:
    """A rate's standard error: the linearized one of the weighed mean, but never below a
    Poisson count's over the effective number of watched steps (Kish's ``w² / w2``), with
    one pseudo-count: a line seen in none, or all, of a few heavy samples is no surer for
    that."""
    lin = max(0.0, acc.w2c2 - 2 * r * acc.w2c + r * r * w2) / (w * w)
    n = w * w / w2
    return math.sqrt(max(lin, (r + 1 / n) / n))


def _place(r: SyncSite) -> tuple[Any, ...]:
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
    **extra: Any,
) -> SyncSite:
    """A row from a site's key ``(op, file, line, function, kind, *library detail)``; an
    older recording's key carries fewer library fields (or none)."""
    op, file, line, function, kind, *lib = key
    lib_file, lib_line, lib_function, package = (*lib, None, None, None, None)[:4]
    return SyncSite(
        op, file, line, function, kind, count, per_step, blocked, last_step,
        lib_file, lib_line, lib_function, package, **extra,
    )  # fmt: skip
