"""Passes between steps watched on a draw of their own: an evaluation's syncs are seen.

The detector's watch follows steps (``sync_sampler.Sampler``): a pass between two steps is
watched only where the step after it is, about one in 200 after the first three. A job
that evaluates once an epoch (PyG's ``mutag_gin``: an ``int()`` of each batch's correct
count) then showed no sync between steps in most runs, although each evaluation makes
one per batch.

So each pass (not a checkpoint's saves) gets a draw too, by the same hash and session
seed: the first ``EARLY`` for sure, then ``(EARLY / n)**2`` down to ``1 / every``. A pass
drawn while the detector is idle, or priming (learning marks in the step before a watched
one, primed again at the watch's end), is watched from its opening (a forward with grad
off, an evaluation's batch) to its end, and its syncs go out as the pass's alone (a
``SyncBatch`` of no watched step: the per-step rates are not touched). One opened while a
step's watch runs is that watch's (its ``between``). The per-pass rate is a plain
mean over the passes watched whole, as it was. A pass that a batch fetched with grad on
may have opened (a forward with grad off came after it; another batch makes it a pass,
training the step's) gets its watch on trial from that forward (``maybe``, ``refuted``).

What it may cost. A watched pass runs slower (every torch call through the mode: a graph
network's evaluation took 2.7 times as long), so pass watches have a budget of their own:
``ALLOW_S`` plus ``FRACTION`` of the training thread's time so far, spent by each watch's
extra time (its length less the typical unwatched pass's, or all of it while none is
known). A pass is drawn only while the budget has room for it (its predicted extra:
``SLOW`` times the typical pass, or the last watch's extra); a watch that outruns what is
left stops there (``Detector.deadline``) and its syncs are dropped: a part of a pass is no
pass. A long evaluation is then not watched at all, and shows no syncs between steps:
absent, never guessed from a part.

Lengths and the deadline are the training thread's CPU time (``time.thread_time``): the
watch's cost is work on that thread, and a busy host's waits for a core are none of it
(in wall time, the same first evaluation of a 2-core CI machine shared with two other
jobs outran the budget, and no pass of the run was watched after).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

EARLY = 2  # passes watched for sure (budget allowing)
SALT = 3  # the passes' draws (``sync_sampler.unit``'s salt), apart from the steps' (1 and 2)
ALLOW_S = 0.25  # what pass watches may cost a run at once (a short evaluation, whole) ...
FRACTION = 0.002  # ... and this share of the training thread's CPU time so far
SLOW = 2.0  # a watched pass's extra, in typical passes, where that is known

_cpu = time.thread_time  # called on the training thread only (the tracker's callbacks)


class PassWatch:
    def __init__(
        self,
        detector: Any,
        collector: Any,
        draw: Callable[[int], float],
        every: int,
        may: Callable[[], bool],
    ) -> None:
        """``draw(n)``: pass ``n``'s number in [0, 1), from the session's seed."""
        self.detector = detector
        self.collector = collector
        self.draw = draw
        self.floor = 1.0 / max(1, every)
        self.may = may  # the detector may start a watch now (not aside, no capture)
        self.n = 0  # passes opened so far (checkpoints aside)
        self.last_t0: float | None = None
        self.watching = False
        self.trial = False  # a watch begun where a pass may have begun (maybe): not known yet
        self.cut = False  # a trial stopped at its deadline: the pass it held is not watched
        self.t_watch = 0.0  # when the watch began
        self.t_open: float | None = None  # when the pass now open began (None: none open)
        self.spent = 0.0  # the watches' extra time so far
        self.typical: float | None = None  # EMA of unwatched passes' lengths
        self.last_cost = 0.0  # the last watch's extra (a guess of the next one's)
        self.dropped = 0  # watches stopped at their deadline
        # The detector was priming when the watch began (the step after the pass is
        # watched): it primes again at the watch's end. Left off, a pass after the step
        # before a watched one went unwatched, the first two passes' "for sure" included.
        self.primed = False
        detector.on_deadline = self.expired

    def p(self, n: int) -> float:
        """The chance that pass ``n`` is watched."""
        return 1.0 if n <= EARLY else min(1.0, max(self.floor, (EARLY / n) ** 2))

    def room(self, now: float) -> float:
        """What watches may still cost now."""
        return ALLOW_S + FRACTION * now - self.spent  # ``now``: that thread's CPU clock

    def opened(self, kind: str, t0: float) -> None:
        """A pass began at ``t0`` (the tracker's ``on_open``; a rollout is the same pass
        opened again under its kind)."""
        if kind.startswith("checkpoint") or t0 == self.last_t0:
            return
        self.last_t0 = t0
        self.n += 1
        self.t_open = now = _cpu()
        if self.trial:  # the watch on trial held it from its first batch: the pass's now
            self.trial, self.watching = False, True
            self.collector.since = t0
            return
        if self.cut:  # its watch stopped at the deadline: one begun now would hold a part
            self.cut = False
            return
        if self.detector.active or not self.may():
            return  # a watched stretch holds it already, or no watch may start
        if self._start(self.n, now):
            self.collector.since = t0
            self.watching = True

    def maybe(self) -> None:
        """A forward with grad off after a batch (pass_open.PassOpen.may_pend): a pass began
        at that batch if another batch comes before training, else the forward was the
        step's own work. Where that pass would be watched (its draw, the budget), the watch
        begins now, on trial, so its first batch's syncs are seen (an evaluation whose
        batches are fetched with grad on, each forward under no_grad: HF's, mmengine's;
        its watched passes read 7 syncs where 8 batches made 8, as the pass was known at
        the second batch only). :meth:`opened` keeps it; :meth:`refuted` drops it."""
        if self.watching or self.trial or self.detector.active or not self.may():
            return
        if self._start(self.n + 1, _cpu()):
            self.trial = True

    def _start(self, n: int, now: float) -> bool:
        """Pass ``n``'s watch begun at ``now`` where its draw and the budget allow it."""
        if self.draw(n) >= self.p(n):
            return False
        room = self.room(now)
        guess = SLOW * self.typical if self.typical is not None else self.last_cost
        if room <= 0.0 or guess > room:
            return False
        self.primed = self.detector.priming
        self.detector.start()  # from priming: counting starts where it is
        self.detector.deadline = now + room
        self.t_watch = now
        return True

    def refuted(self) -> None:
        """Training came next: the forward was the step's; what the trial saw is dropped
        (a part of a step is no step), its time spent from the budget."""
        if not self.trial:
            self.cut = False  # training came: whatever the cut trial held was the step's
            return
        self.trial = False
        self._release()
        self.collector.drop()
        self.spent += _cpu() - self.t_watch

    def closed(self, kind: str) -> None:
        """A pass's interval was reported (every pass, watched or not)."""
        if kind.startswith("checkpoint") or self.t_open is None:
            return
        length, self.t_open = _cpu() - self.t_open, None
        if not self.watching and not self.detector.active:
            t = self.typical
            self.typical = length if t is None else t + 0.2 * (length - t)

    def ended(self, step: int) -> None:
        """The pass watched ended (its interval reported): its syncs go out alone."""
        if not self.watching:
            return
        self._stop()
        self.collector.flush_pass(step)

    def expired(self) -> None:
        """The watch outran the budget (the detector's deadline, inside a torch call):
        stopped, and what it saw of the pass dropped."""
        if self.trial:
            self.refuted()
            self.dropped += 1
            self.cut = True
            return
        if not self.watching:
            self.detector.deadline = 0.0
            return
        self._stop()
        self.dropped += 1
        self.collector.drop()

    def _release(self) -> None:
        """The detector stopped, and priming again where the watch began in its priming."""
        det = self.detector
        det.deadline = 0.0
        det.stop()
        if self.primed:
            self.primed = False
            det.prime()

    def _stop(self) -> None:
        self.watching = False
        self._release()
        length = _cpu() - self.t_watch
        t = self.typical
        self.last_cost = max(0.0, length - (t if t is not None else 0.0))
        self.spent += self.last_cost
