"""perftop's step track as Chrome trace events: a step is a complete event (``ph: X``) with
its phases as nested complete events laid end to end in the order a step runs them (data
wait, forward and the rest, backward, optimizer). One rendering, for ``export --chrome``
and for the tracks added to a capture's trace (:mod:`perftop.export.capture_trace`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from perftop.events import Step


def step_events(
    ev: Step, pid: int, us: Callable[[float], float], tid: int | None = None
) -> list[dict[str, Any]]:
    """The step and its phases on track ``pid`` (thread ``tid``, the pid's own by default);
    ``us`` turns an event time into the trace's microseconds."""
    tid = pid if tid is None else tid
    dur = ev.t1 - ev.t0
    args: dict[str, Any] = {"index": ev.index, "source": ev.source}
    if ev.phases:
        args["phases_s"] = ev.phases
    out: list[dict[str, Any]] = [
        {
            "ph": "X",
            "name": "step",
            "cat": "step",
            "pid": pid,
            "tid": tid,
            "ts": us(ev.t0),
            "dur": round(dur * 1e6, 3),
            "args": args,
        }
    ]
    other = max(0.0, dur - ev.data - ev.backward - ev.optimizer)
    t = ev.t0
    for label, d in (
        ("data wait", ev.data),
        ("forward/other", other),
        ("backward", ev.backward),
        ("optimizer", ev.optimizer),
    ):
        if d > 0:
            out.append(
                {
                    "ph": "X",
                    "name": label,
                    "cat": "phase",
                    "pid": pid,
                    "tid": tid,
                    "ts": us(t),
                    "dur": round(d * 1e6, 3),
                }
            )
            t += d
    return out
