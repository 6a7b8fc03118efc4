"""A process's wait for a core from the probe's counter (perftop/model/trends.py): the
share over the latest ~10 s and over all the time seen, none over less than 2 s, and a
counter that goes back (a pid reused, a damaged row) starts afresh."""

from __future__ import annotations

from perftop.model.trends import WAIT_SPAN_S, CoreWait


def test_latest_and_whole_shares() -> None:
    w = CoreWait()
    assert w.share() is None and w.share_avg() is None
    w.add(100.0, 5.0)
    w.add(101.0, 5.5)
    assert w.share() is None  # 1 s: too short to say
    for i in range(2, 31):  # 0.5 s a second, then none after 120 s
        w.add(100.0 + i, 5.5 + 0.5 * (i - 1) if i <= 20 else 15.0)
    assert w.share() == 0.0  # the latest 10 s waited nothing
    assert w.share_avg() == round(10.0 / 30.0, 4)
    assert w.recent[-1][0] - w.recent[0][0] <= WAIT_SPAN_S + 1.0


def test_none_and_a_counter_that_goes_back() -> None:
    w = CoreWait()
    w.add(0.0, None)  # a kernel without run-queue delays: nothing
    assert not w.recent
    w.add(0.0, 10.0)
    w.add(4.0, 14.0)  # all of it: clamped to 1
    assert w.share() == 1.0
    w.add(5.0, 1.0)  # went back: another process's counter
    w.add(9.0, 2.0)
    assert w.share() == 0.25 and w.share_avg() == 0.25


def test_another_threads_counter_starts_afresh() -> None:
    """The probe reads a training thread's counter once the hook named it (a Ray Train
    worker's): a higher count than the main thread's is no wait between the two ticks."""
    w = CoreWait()
    w.add(0.0, 1.0)
    w.add(4.0, 1.2)  # the main thread, in a join: 5%
    assert w.share() == 0.05
    w.add(5.0, 3.0, tid=42)  # the training thread's own counter from its start
    w.add(9.0, 5.0, tid=42)
    assert w.share() == 0.5 and w.share_avg() == 0.5
