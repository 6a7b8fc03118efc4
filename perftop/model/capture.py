"""On-demand op captures (``CaptureAsk``, ``CaptureState``, ``CaptureOps``) reduced into
the snapshot: each capture with who asked it, where it stands in each process (with the
reason of a refusal), and, once done, its ops summary and the path of its full trace.

A replay folds the same events, so the latest capture of a snapshot is the one in effect
at that point of the recording.

A capture's cost compares its steps with the median of up to 20 steps of the same process
just before it, as the hook measured it (``CaptureOps.before_s``, ``before_n``; a hook of
older than this sent the mean of the 2 steps before): the one figure the Ops panel, the report,
the TUI's notice and ``perftop trace`` all give. It counts the steps just after the capture
too, while the hook made its summary and wrote its trace (``CaptureOps.after_s``, what they
took over the steps before, in all): that work runs on a thread of its own, but one that
shares the interpreter with the training (timm's three steps after a capture took 6.8, 16.5
and 8.1 s against 3.9 s), so it is spread over the captured steps, and said.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

from perftop.events import CaptureAsk, CaptureOps, CaptureState
from perftop.fmt_sync import sync_where

MAX_CAPTURES = 64  # a session keeps its latest captures only
MONITOR_PID = 0  # CaptureState.pid of the monitor itself (asked, or refused before any hook)
ENDED = ("refused", "failed", "done")
HOOK_BEFORE_STEPS = 2  # an older hook's baseline: the mean of this many steps before


@dataclass(frozen=True, slots=True)
class CaptureOp:
    """One op of a capture, per captured step (seconds). ``share`` is its self time's share
    of its phase's time (None where the phase took no measured time)."""

    name: str
    phase: str
    calls: float
    self_s: float
    device_s: float = 0.0
    shapes: str = ""
    file: str = ""
    line: int = 0
    function: str = ""
    share: float | None = None

    @property
    def where(self) -> str:
        """The function of the user's code that called it, at its first line
        (``train.py:52 train()``: the profiler records calls, not lines), "" unknown."""
        if not self.file:
            return ""
        at = sync_where(self.file, self.line, None, None, None)[0]
        return f"{at} {self.function}()" if self.function else at


@dataclass(frozen=True, slots=True)
class CapturePart:
    """One capture in one process (``pid`` 0: the monitor, before any hook answered)."""

    pid: int
    state: str
    t: float
    reason: str = ""
    first_step: int = -1
    steps: int = 0
    step_s: float | None = None  # mean step during the capture (once done)
    before_s: float | None = None  # the steps just before: their median (None: none)
    before_n: int = 0  # how many steps ``before_s`` rests on
    after_s: float = 0.0  # what the steps just after took over ``before_s``, in all
    after_n: int = 0  # how many steps after were counted
    before_sd_s: float = 0.0  # the spread of the steps before (a robust std; 0.0: not sent)
    phase_s: dict[str, float] = field(default_factory=dict)
    ops: tuple[CaptureOp, ...] = ()
    more_ops: int = 0
    device: dict[str, tuple[float, float, float]] = field(default_factory=dict)
    trace: str = ""
    clock_offset_us: float = 0.0

    @property
    def cost_s(self) -> float | None:
        """What the capture added to each of its steps: see :func:`capture_cost`."""
        if self.step_s is None or self.before_s is None:
            return None
        return capture_cost(self.step_s, self.before_s, self.after_s, self.steps)

    @property
    def cost_err_s(self) -> float | None:
        """The cost's standard error: see :func:`cost_error`."""
        return cost_error(self.before_sd_s, self.steps, self.after_n, self.before_n)

    @property
    def last_step(self) -> int:
        return self.first_step + self.steps - 1


@dataclass(frozen=True, slots=True)
class Capture:
    """A capture as asked (``by``: ``tui``, ``trace``, ``attach``; ``steps``: how many) and
    its parts, one per process that answered, in the order they did."""

    capture_id: str
    t: float
    by: str = ""
    steps: int = 0
    parts: tuple[CapturePart, ...] = ()

    @property
    def state(self) -> str:
        """Where it stands as a whole: the first process's state (a monitor's refusal when
        no hook answered)."""
        shown = self.shown_parts()
        return shown[0].state if shown else "asked"

    def shown_parts(self) -> tuple[CapturePart, ...]:
        """The processes' parts; the monitor's own only while no hook answered, or where it
        refused or failed the capture itself."""
        hooks = tuple(p for p in self.parts if p.pid != MONITOR_PID)
        own = tuple(p for p in self.parts if p.pid == MONITOR_PID)
        if hooks and not any(p.state in ENDED for p in own):
            return hooks
        return own + hooks

    def done(self) -> CapturePart | None:
        """The first finished part with its summary (the one the Ops view shows)."""
        return next((p for p in self.parts if p.state == "done" and p.step_s is not None), None)


def capture_cost(step_s: float, before_s: float, after_s: float, steps: int) -> float:
    """What a capture added to each of its ``steps``: their mean time over the steps
    before, with what the steps just after it took over them (``after_s``, while its
    summary and trace were made) spread over its steps."""
    return step_s - before_s + (after_s / steps if steps > 0 else 0.0)


def cost_error(sd_s: float, steps: int, after_n: int, before_n: int) -> float | None:
    """The standard error of a capture's cost from the spread ``sd_s`` of the ``before_n``
    steps before it (the hook's robust standard deviation): the captured steps' mean
    (``steps`` of them), the ``after_n`` steps after (spread over the captured ones) and
    the median before (π/2 times a mean's variance) each move by that spread,
    ``sd·√(1/k + m/k² + π/2n)``. None where there is no spread (under 3 steps before, an
    older hook): the cost is then said without an error."""
    if not 0 < sd_s < math.inf or steps <= 0 or before_n < 3:
        return None  # (nan and inf too: an event is any writer's)
    return sd_s * math.sqrt(1 / steps + max(0, after_n) / steps**2 + math.pi / (2 * before_n))


def ops_of(ev: CaptureOps) -> tuple[CaptureOp, ...]:
    """The event's :data:`~perftop.events.capture.OpRow` tuples as named ops."""
    out = []
    for row in ev.ops:
        name, phase, calls, self_s, device_s, shapes, file, line, function = row[:9]
        phase_s = ev.phase_s.get(phase, 0.0)
        out.append(
            CaptureOp(
                str(name),
                str(phase),
                float(calls),
                float(self_s),
                float(device_s),
                str(shapes),
                str(file),
                int(line),
                str(function),
                float(self_s) / phase_s if phase_s > 0 else None,
            )
        )
    return tuple(out)


def done_part(ev: CaptureOps) -> CapturePart:
    """A finished capture's part, as the hook summed it up. Its cost compares with the
    hook's figure: the median of up to 20 steps before (an older hook's: the mean of the 2
    steps before, ``before_n`` 0). One cost, wherever shown (``perftop trace`` too)."""
    base = (ev.before_s, ev.before_n or HOOK_BEFORE_STEPS) if ev.before_s > 0 else None
    return CapturePart(
        pid=ev.pid,
        state="done",
        t=ev.t,
        first_step=ev.first_step,
        steps=ev.steps,
        step_s=ev.step_s,
        before_s=base[0] if base else None,
        before_n=base[1] if base else 0,
        after_s=ev.after_s,
        after_n=ev.after_n,
        before_sd_s=ev.before_sd_s if base else 0.0,
        phase_s=dict(ev.phase_s),
        ops=ops_of(ev),
        more_ops=ev.more_ops,
        device=dict(ev.device or {}),
        trace=ev.trace,
        clock_offset_us=ev.clock_offset_us,
    )


class CaptureReducer:
    handles = (CaptureAsk, CaptureState, CaptureOps)

    def __init__(self) -> None:
        self.captures: dict[str, Capture] = {}

    def _get(self, capture_id: str, t: float) -> Capture:
        c = self.captures.get(capture_id)
        if c is None:
            if len(self.captures) >= MAX_CAPTURES:
                del self.captures[next(iter(self.captures))]
            c = self.captures[capture_id] = Capture(capture_id, t)
        return c

    def _put(self, c: Capture, part: CapturePart) -> None:
        parts = [p for p in c.parts if p.pid != part.pid]
        old = next((p for p in c.parts if p.pid == part.pid), None)
        if old is not None and old.state == "done" and part.state != "done":
            return  # a late state of a finished capture does not undo its summary
        at = c.parts.index(old) if old is not None else len(parts)
        parts.insert(at, part)
        self.captures[c.capture_id] = replace(c, parts=tuple(parts))

    def apply(self, ev: Any) -> None:
        c = self._get(ev.capture_id, ev.t)
        if isinstance(ev, CaptureAsk):
            self.captures[c.capture_id] = replace(c, by=ev.by, steps=ev.steps)
        elif isinstance(ev, CaptureState):
            old = next((p for p in c.parts if p.pid == ev.pid), None)
            if old is not None and old.state == "done":
                return
            first = ev.first_step if ev.first_step >= 0 else (old.first_step if old else -1)
            steps = ev.steps or (old.steps if old else 0) or c.steps
            self._put(c, CapturePart(ev.pid, ev.state, ev.t, ev.reason, first, steps))
            if not c.steps and ev.steps:
                self.captures[c.capture_id] = replace(self.captures[c.capture_id], steps=ev.steps)
        else:
            self._put(c, done_part(ev))

    def contribute(self, parts: dict[str, Any], window: int | None) -> None:
        parts["captures"] = tuple(self.captures.values())
