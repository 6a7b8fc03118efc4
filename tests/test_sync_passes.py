"""The pass watch's draws and budget (``perftop/hook/sync_passes.py``), driven as the hook
drives it, with the real collector: what a watched pass sends, and that a watch that
outruns its budget sends nothing of the part it saw."""

from __future__ import annotations

from typing import Any

import pytest

from perftop.events import SyncBatch
from perftop.hook import sync_passes
from perftop.hook.sync_collector import Collector
from perftop.hook.sync_sampler import unit

SITE = ("int", "potential", ("job.py", 9, "test", None, None, None, None))


class Detector:
    """What the watch asks of the detector: whether a watch runs, start and stop."""

    def __init__(self) -> None:
        self.active = self.priming = False
        self.deadline = 0.0
        self.on_deadline: Any = None
        self.starts = 0

    def start(self) -> None:
        self.active = True
        self.starts += 1

    def stop(self) -> None:
        self.active = False


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    now = [0.0]  # the training thread's CPU clock, from the thread's start
    monkeypatch.setattr(sync_passes, "_cpu", lambda: now[0])
    return now


def _watch(clock: list[float]) -> tuple[sync_passes.PassWatch, Detector, list[Any]]:
    sent: list[Any] = []
    det = Detector()
    col = Collector(sent.append, lambda: 7)
    draw = lambda n: unit(n, sync_passes.SALT, 1)  # noqa: E731
    return sync_passes.PassWatch(det, col, draw, every=200, may=lambda: True), det, sent


def _pass(pw: sync_passes.PassWatch, clock: list[float], length: float, syncs: int) -> None:
    """One pass as the hook reports it: opened, its syncs, its interval, its end."""
    t0 = clock[0]
    pw.opened("eval", t0)
    for _ in range(syncs):
        if pw.detector.active:
            pw.collector.log.append((t0 + length / 2, SITE, 1, None))
    clock[0] = t0 + length
    if pw.detector.active:
        pw.collector.between("eval", t0, length)
    pw.closed("eval")
    pw.ended(3)


def test_a_watched_pass_goes_out_alone_with_its_syncs(clock: list[float]) -> None:
    pw, det, sent = _watch(clock)
    _pass(pw, clock, 0.05, syncs=8)
    [batch] = sent
    assert isinstance(batch, SyncBatch) and not batch.sampled and batch.sites == ()
    assert batch.passes == 1 and batch.between[0][5] == 8
    assert not det.active and det.deadline == 0.0
    pw.opened("checkpoint", clock[0])  # a checkpoint's saves: never a pass watch
    pw.opened("eval", 0.5)  # ...
    pw.opened("rollout", 0.5)  # the same pass opened again under its kind: one draw
    assert pw.n == 2 and det.starts == 2


def test_a_watch_that_outruns_its_budget_sends_nothing(clock: list[float]) -> None:
    pw, det, sent = _watch(clock)
    pw.opened("eval", clock[0])
    assert det.active and det.deadline == pytest.approx(clock[0] + sync_passes.ALLOW_S)
    pw.collector.log.append((clock[0] + 0.1, SITE, 1, None))
    clock[0] += sync_passes.ALLOW_S + 0.01
    pw.expired()  # the detector's deadline, met inside a torch call
    assert not det.active and not pw.watching and pw.dropped == 1
    pw.closed("eval")
    pw.ended(3)
    assert sent == []  # a part of a pass is no pass
    # spent: the next pass is drawn (the second is watched for sure) but has no room
    _pass(pw, clock, 0.05, syncs=3)
    assert sent == [] and det.starts == 1


def test_the_budget_grows_with_the_run_and_keeps_long_passes_unwatched(clock: list[float]) -> None:
    pw, det, sent = _watch(clock)
    _pass(pw, clock, 0.2, syncs=1)  # the first, whole: its cost all extra (none typical)
    assert len(sent) == 1 and pw.spent == pytest.approx(0.2)
    clock[0] += 1.0
    _pass(pw, clock, 0.2, syncs=1)  # the last watch's cost does not fit what is left
    assert len(sent) == 1 and pw.typical == pytest.approx(0.2)
    # 0.2% of the run's time pays for later watches: after 1,000 s, 2 s of them
    clock[0] += 1000.0
    pw.n = 0  # drawn for sure again
    _pass(pw, clock, 0.2, syncs=1)
    assert len(sent) == 2
    # a pass that would cost more than the room is not started
    pw.typical = 10.0
    pw.n = 0
    _pass(pw, clock, 10.0, syncs=1)
    assert len(sent) == 2


def test_a_watch_on_trial_is_kept_by_its_pass_and_dropped_by_training(clock) -> None:
    """``maybe`` (a forward with grad off after a batch) starts the pass's watch at once;
    the pass confirmed (``opened``: its second batch) keeps it, and it sends the syncs seen
    since its first forward; training instead (``refuted``: a teacher's forward) drops
    what it saw and spends its time; a trial cut at its deadline watches nothing of that
    pass (a watch begun at its second batch would send a part of it as a whole)."""
    pw, det, sent = _watch(clock)
    clock[0] = 10.0
    pw.maybe()
    assert det.active and det.starts == 1 and pw.trial and pw.n == 0
    pw.collector.log.append((10.0, SITE, 1, None))  # the first batch's sync
    _pass(pw, clock, 0.01, 7)  # its next batch opens it: the watch is the pass's
    assert det.starts == 1 and pw.n == 1 and not pw.watching and not det.active
    (batch,) = sent
    assert isinstance(batch, SyncBatch) and batch.passes == 1
    assert [s[5] for s in batch.between] == [8]  # 7 and the first batch's
    spent = pw.spent  # the watched pass's cost
    pw.maybe()  # a teacher's forward: training follows
    pw.collector.log.append((clock[0], SITE, 1, None))
    clock[0] += 0.002
    pw.refuted()
    assert not det.active and not pw.collector.log and pw.n == 1
    assert pw.spent == pytest.approx(spent + 0.002)
    pw.maybe()  # cut at its deadline, then its pass opens: not watched from there
    det.on_deadline()
    assert not det.active and pw.cut and pw.dropped == 1
    _pass(pw, clock, 0.01, 3)
    assert det.starts == 3 and len(sent) == 1 and not pw.cut
    pw.refuted()  # a step's end: nothing on trial, nothing cut
    assert not pw.cut and not det.active
