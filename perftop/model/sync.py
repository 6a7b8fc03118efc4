"""Sync sites over a whole session: counts summed across steps and processes.

Rates divide by the steps that were actually watched: sampled steps for what the sampled
detector saw (real syncs too, since CUDA's debug mode is on in those steps only; older
recordings had it on every step of a process). Syncs made outside training steps in a
watched stretch (an evaluation or sampling pass) are kept apart, per pass watched. A line with a real sync
hides the same line's ``potential`` entry (it is the same wait, now measured), and lends
it the op name the detector knew when the debug mode could only say "sync", and the time
blocked the detector measured. A site is a user line together with the library line it
went through (if any): one user line reaching two library lines is two sites, and one
library line reached from two user lines is one site, its count theirs summed, with both
lines as its ``callers`` (the most frequent one names the row).

``blocked_s`` is per watched step: the host time measured inside the site's calls in the
sampled steps (on an accelerator only), divided by the sampled steps.

Each sampled step comes with its weight (1 / the probability it had of being watched, see
``hook.sync.Sampler``). A rate is over the steps the sampled processes ran (from their
second step, the first one a watch can hold), in two strata: the first steps, watched for
sure (weight 1), count as themselves, and the rest by the drawn steps (Horvitz-Thompson,
see :meth:`SyncReducer._stratified`). A ratio over all
the weights read a loop's lines of its first iterations (a log on iterations 1-4) at
several times their rate when few later steps were drawn, and every run the same. A site
seen in every watched step, at least ``EVERY`` drawn ones included and one of them past
the first ``REACH`` of its process's steps, is a per-step site (``every_step``): its
rate is its weighed mean count, its error the spread of its counts. The draws thin out
as a run goes on (most fall in its first steps): an L-BFGS loop made 2 syncs in each of
steps 1-11, all its watched ones, and 1.19 a step over its 80, which "every step ×2.00"
would have read with no error; till a draw reaches further in, such a site reads as what
was seen ("in 6 of 6 watched steps"), its error as large as its rate. In the exact mode
(every step watched) the error is 0.
Recordings from before the weights (every weight 1 past the first steps) keep the ratio.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from perftop.events import Note, Step, SyncBatch, SyncInfo
from perftop.model.finding_rows import SyncSite, SyncWatch
from perftop.model.sync_sites import _Acc, _cost, _error, _place, _site, _unseen
from perftop.wire import SYNC_PAUSED_NOTE, StepRecord

# op, file, line, function, kind, lib_file, lib_line, lib_function, package
_Key = tuple[str, str, int, str, str, str | None, int | None, str | None, str | None]
_NO_LIB = (None, None, None, None)  # sites recorded before the library fields existed
EVERY = 3  # drawn steps (past the first ones) a site must be seen in each of: "every step"
REACH = 0.25  # the share of a process's steps one of its drawn steps must come after


class SyncReducer:
    handles = (SyncInfo, SyncBatch, Step, Note)

    def __init__(self) -> None:
        self.sites: dict[_Key, _Acc] = {}
        self.between: dict[_Key, _Acc] = {}
        self.debug_pids: set[int] = set()
        self.debug_steps = 0  # steps of processes whose every step the CUDA mode watched
        self.sampled_steps = 0
        self.w = self.w2 = 0.0  # sums of the sampled steps' weights, and of their squares
        self.n_early = 0  # sampled steps watched for sure (weight 1)
        self.rw = self.rw2 = 0.0  # sums of the drawn steps' weights (> 1), and their squares
        self.n_drawn = 0
        self.exact_pids: set[int] = set()  # processes that watch every step
        self.sampled_pids: set[int] = set()
        self.passes = 0  # passes outside training steps that a watched stretch held whole
        self._sampled_seen: set[tuple[int, int]] = set()
        self.steps: dict[int, int] = {}  # per process, its steps a watch can hold (index >= 1)
        self.early: dict[int, int] = {}  # per process, the steps it always watches first
        self.weighed: set[int] = set()  # processes that sent a weight other than 1
        self.pid_sampled: dict[int, int] = {}  # per process, its watched steps
        self.last_drawn: dict[int, int] = {}  # per process, its latest drawn step's index
        # a library site's user lines: (file, line, function) -> count
        self.callers: dict[_Key, dict[tuple[str, int, str], int]] = {}
        self.paused = ""  # why a process's detector stopped sampling (its hook's note)

    def apply(self, ev: Any) -> None:
        if isinstance(ev, Step):
            if ev.pid in self.debug_pids:
                self.debug_steps += 1
            if ev.index >= 1:
                self.steps[ev.pid] = self.steps.get(ev.pid, 0) + 1
        elif isinstance(ev, SyncBatch):
            if ev.sampled and (ev.pid, ev.step) not in self._sampled_seen:
                self._sampled_seen.add((ev.pid, ev.step))
                self.sampled_steps += 1
                self.passes += ev.passes
                self.w += ev.weight
                self.w2 += ev.weight * ev.weight
                self.sampled_pids.add(ev.pid)
                self.pid_sampled[ev.pid] = self.pid_sampled.get(ev.pid, 0) + 1
                if ev.weight != 1.0:
                    self.weighed.add(ev.pid)
                    self.n_drawn += 1
                    if ev.step > self.last_drawn.get(ev.pid, 0):
                        self.last_drawn[ev.pid] = ev.step
                    self.rw += ev.weight
                    self.rw2 += ev.weight * ev.weight
                else:
                    self.n_early += 1
            elif not ev.sampled and not ev.sites:
                # a pass watched on its own draw, or a final pass's (sent at exit): no step
                self.passes += ev.passes
            for into, sites in ((self.sites, ev.sites), (self.between, ev.between)):
                # a library line reached from several user lines is one site: its count in
                # this step is theirs summed, and each line is one of its callers
                step: dict[_Key, list[Any]] = {}
                for op, file, line, function, kind, count, *rest in sites:
                    lib = tuple(rest[1:5]) if len(rest) >= 5 else _NO_LIB
                    key: _Key
                    if lib[0] is not None:
                        key = (op, "", 0, "", kind, *lib)
                        callers = self.callers.setdefault(key, {})
                        where = (file, line, function)
                        callers[where] = callers.get(where, 0) + count
                    else:
                        key = (op, file, line, function, kind, *lib)
                    acc_n = step.setdefault(key, [0, None])
                    acc_n[0] += count
                    blocked = rest[0] if rest else None
                    if blocked is not None:
                        acc_n[1] = (acc_n[1] or 0.0) + blocked
                for key, (count, blocked) in step.items():
                    acc = into.get(key)
                    if acc is None:
                        acc = into[key] = _Acc()
                    acc.add(ev.step, ev.sampled, count, blocked, ev.weight)
        elif isinstance(ev, Note):
            if ev.source.startswith("hook:") and ev.text.startswith(SYNC_PAUSED_NOTE):
                self.paused = ev.text[len(SYNC_PAUSED_NOTE) :].split(";", 1)[0]
        elif isinstance(ev, SyncInfo):
            if ev.cuda_debug:
                self.debug_pids.add(ev.pid)
            if ev.exact:
                self.exact_pids.add(ev.pid)
            self.early[ev.pid] = ev.early

    def apply_steps(self, records: Sequence[StepRecord]) -> None:
        """Packed step records: as :meth:`apply` of each one's :class:`Step`."""
        if self.debug_pids:
            self.debug_steps += sum(1 for r in records if r[0] in self.debug_pids)
        steps = self.steps
        for r in records:
            if r[1] >= 1:
                steps[r[0]] = steps.get(r[0], 0) + 1

    def contribute(self, parts: dict[str, Any], window: int | None) -> None:
        parts["sync"] = self.rows()
        parts["sync_watch"] = SyncWatch(self.sampled_steps, self.paused, self.passes)
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
                    self.callers.get(key),
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
        steps = 0 if exact else self._steps_watchable()
        spread = exact or (self.n_drawn >= EVERY and self._reached())
        for key, acc in self.sites.items():
            if self.w > 0 and (acc.sampled or key[4] != "sync"):
                # (a potential site seen in no watched step, only after the last one: a
                # rate of 0 over the steps watched, its count its own)
                every = acc.seen >= self.sampled_steps and spread
                if exact:
                    per_step, error = acc.wc / self.w, 0.0
                elif steps:
                    per_step, error = self._stratified(acc, steps, every)
                else:  # an older recording: the ratio over the weights
                    per_step = acc.wc / self.w
                    error = _error(self.w, self.w2, acc.wc, acc.w2c, acc.w2c2, per_step)
                est: dict[str, Any] = {
                    "watched": self.sampled_steps,
                    "error": error,
                    "seen": acc.seen,
                    "every_step": every,
                    "exact": exact,
                }
            elif key[4] != "sync":
                per_step, est = 0.0, {}  # no step watched at all: no rate
            else:
                debug = self.debug_steps
                per_step = acc.count / debug if debug else float(acc.count)
                est = {}
            blocked = None
            if acc.blocked is not None and self.w > 0:
                blocked = acc.blocked / self.w
            row = _site(
                key, acc.count, per_step, blocked, acc.last_step, self.callers.get(key), **est
            )
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

    def _stratified(self, acc: _Acc, steps: int, every: bool) -> tuple[float, float]:
        """A rate over ``steps`` and its standard error, in two strata: the steps watched
        for sure (the first ones: their count is known) and the rest, drawn with known
        probabilities. The rest's rate, for a site seen in every watched step: its weighed
        mean count, with the spread of its counts for error where that rests on
        ``EVERY`` drawn steps (``every``: a per-step site; never below what that many
        sightings can tell, :func:`_unseen`), else with an error as large as
        that rate (a line of the first iterations only looks the same); for any other
        site, its Horvitz-Thompson sum over the rest (unbiased whatever the draws: a mean
        over the weights read a line of steps 4-5, drawn nearly for sure, as the rest's
        rate) with its standard error ``sqrt(sum (w² - w) c²)``, never below a Poisson
        count's over the effective number of drawn steps."""
        rest = max(0, steps - self.n_early)
        if rest == 0 or self.n_early + self.n_drawn == 0:
            return acc.wc / self.w, 0.0
        if acc.seen >= self.sampled_steps:  # in every watched step
            if self.n_drawn:
                r = acc.rwc / self.rw
                err = _error(self.rw, self.rw2, acc.rwc, acc.rw2c, acc.rw2c2, r, floor=not every)
            else:
                r, err = acc.early / self.n_early, 0.0
            # a per-step site's spread says nothing of the steps no draw held (_unseen)
            err = max(err, r * _unseen(self.n_drawn) if every else r)
        elif self.n_drawn:
            r = acc.rwc / rest
            n = self.rw * self.rw / self.rw2
            var = max(0.0, acc.rw2c2 - acc.rwc2) / (rest * rest)
            err = math.sqrt(max(var, (r + 1 / n) / n))
        else:  # the Horvitz-Thompson sum is 0; the rest may hold as much as the first steps
            r, err = 0.0, max(acc.early / self.n_early, 1.0 / self.n_early)
        return (acc.early + rest * r) / steps, err * rest / steps

    def _reached(self) -> bool:
        """Whether a drawn step came after the first ``REACH`` of its process's steps."""
        return any(j > REACH * self.steps.get(pid, 0) for pid, j in self.last_drawn.items())

    def _steps_watchable(self) -> int:
        """The steps the sampled processes ran that a watch could hold, the Horvitz-Thompson
        divisor; 0 where a sampled process is of an older recording (weights all 1 past its
        first steps: the ratio over the weights then) or its steps are not known."""
        total = 0
        for pid in self.sampled_pids:
            n = self.steps.get(pid, 0)
            older = pid not in self.weighed and self.pid_sampled.get(pid, 0) > self.early.get(
                pid, 3
            )
            if older or n < self.pid_sampled.get(pid, 0):
                return 0
            total += n
        return total
