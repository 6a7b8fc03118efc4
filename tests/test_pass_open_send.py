"""When a pass's start (``BetweenOpen``) is sent at once where the training thread sends
(solo): a send costs a pass ~0.1 ms, so not after a short pass (a DQN's rollouts of a few
environment steps, every millisecond), but after a long one (the stall watch must know an
evaluation runs before it would call the step stalled), for a checkpoint, and at least once
a second. The real HookState (no monitor: its sender stays silent), its sends recorded."""

from __future__ import annotations

import importlib
from typing import Any

import pytest

from perftop.events import BetweenOpen

hook_state = importlib.import_module("perftop.hook.state")  # the package has a state()


@pytest.fixture
def sends(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, list[bool], list[float]]:
    st = hook_state.HookState(str(tmp_path / "no-monitor.sock"))
    urgent: list[bool] = []

    def put(ev: Any, urgent_now: bool = False) -> None:
        if isinstance(ev, BetweenOpen):
            urgent.append(urgent_now)

    monkeypatch.setattr(st.sender, "put", lambda ev, urgent=False: put(ev, urgent))
    now = [1000.0]
    monkeypatch.setattr(hook_state.time, "perf_counter", lambda: now[0])
    return st, urgent, now


def test_short_passes_send_their_start_at_most_once_a_second(sends: Any) -> None:
    st, urgent, now = sends
    st.opened("eval", now[0])  # the first pass: nothing known of its length
    for _ in range(50):  # rollouts of 1 ms, one every 2 ms
        st.between("rollout", now[0], 0.001, "collect_rollouts", 0.0005)
        now[0] += 0.002
        st.opened("eval", now[0])
    assert urgent[0] is True and not any(urgent[1:])
    now[0] += hook_state.OPEN_EVERY_S
    st.opened("eval", now[0])
    assert urgent[-1] is True


def test_after_a_long_pass_and_for_a_checkpoint_the_start_goes_at_once(sends: Any) -> None:
    st, urgent, now = sends
    st.opened("eval", now[0])
    st.between("eval", now[0], 0.3, "evaluate", 0.2)
    now[0] += 0.1
    st.opened("eval", now[0])  # may be long again: the stall watch must know at once
    st.between("eval", now[0], 0.001, "evaluate", 0.0)
    now[0] += 0.01
    st.opened("checkpoint", now[0])
    st.opened("eval", now[0] + 0.01)
    assert urgent == [True, True, True, False]
