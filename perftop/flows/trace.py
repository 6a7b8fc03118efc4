"""`perftop trace`: ask a running session for an op capture and print what came back.

The one summary text of a capture (:func:`capture_lines`) is shared with the TUI's notice.
"""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path

from perftop.console import say
from perftop.errors import AttachError, PerftopError, UsageError
from perftop.events import CaptureOps, CaptureState, Event
from perftop.export.capture_trace import TraceError, read_trace
from perftop.fmt import command as fmt_command
from perftop.fmt import seconds as fmt_seconds
from perftop.fmt import step_no
from perftop.model.capture import done_part, ops_of
from perftop.model.capture_words import cost_text, steps_text

MAX_STEPS = 50  # the hook's own bound (perftop.hook.capture.MAX_STEPS)
ANNOTATE_WAIT_S = 8.0  # the monitor's wait for a capture's last steps, and some
NO_STEPS = " (without perftop's step track: the session did not add it in time)"


def trace(target: str, steps: int, out: Path | None, timeout: float) -> int:
    from perftop.monitor.capture import request
    from perftop.monitor.registry import find_session

    info = find_session(target)
    if info is None:
        if Path(target).suffix == ".sock" or not target.isdigit():
            raise AttachError(f"{target}: no perftop session answers there (see perftop ls)")
        raise AttachError(f"pid {target}: not in a perftop session (see perftop ls)")
    got: list[Event] = []
    say(
        f"perftop: capturing the next {steps} steps of {fmt_command(info.get('command') or [target])}…"
    )

    def heard(ev: Event) -> None:
        got.append(ev)
        if isinstance(ev, CaptureState) and ev.state == "started":
            say(f"perftop: pid {ev.pid}: capture started at step {step_no(ev.first_step)}")

    request(info["socket"], steps, "trace", heard, timeout + steps)
    ops = [e for e in got if isinstance(e, CaptureOps)]
    ends = [e for e in got if isinstance(e, CaptureState) and e.state in ("refused", "failed")]
    if not ops:
        if ends:
            raise PerftopError(f"capture {ends[0].state}: {ends[0].reason}")
        raise PerftopError("the session ended before the job answered")
    for cap in ops:
        for line in capture_lines(cap):
            say(line)
    for e in ends:
        say(f"perftop: pid {e.pid}: capture {e.state}: {e.reason}")
    if out is not None:
        src = next((c.trace for c in ops if c.trace), "")
        if not src:
            raise PerftopError("the job wrote no trace file to copy")
        annotated = _annotated(src, time.monotonic() + ANNOTATE_WAIT_S)
        try:
            shutil.copyfile(src, out)
        except OSError as exc:
            raise UsageError(f"cannot copy the trace to {out}: {exc.strerror}") from None
        say(f"perftop: trace copied to {out}" + ("" if annotated else NO_STEPS))
    return 0


def _annotated(path: str, deadline: float) -> bool:
    """Wait until the monitor has added perftop's steps to the trace (it waits for the
    capture's last steps first, :data:`perftop.flows.captures.WAIT_S`), so that the copy
    has them; False when it did not in time."""
    while True:
        try:
            other = read_trace(path).get("otherData")
            if isinstance(other, dict) and other.get("perftop_steps"):
                return True
        except TraceError:
            pass
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.2)


class Teller:
    """One capture's events as notices for the TUI: ``tell(text, error)``."""

    def __init__(self, tell: Callable[[str, bool], object]) -> None:
        from perftop.monitor.capture import Answers

        self.tell = tell
        self.answers = Answers()
        self.done: Callable[[], object] | None = None

    def until(self, pids: set[int], done: Callable[[], object]) -> None:
        """Call ``done`` once each of ``pids`` has answered (none: once refused)."""
        self.answers.pids, self.done = pids, done

    def __call__(self, ev: Event) -> None:
        if self.answers.finished(ev) and self.done is not None:
            self.done()
        if isinstance(ev, CaptureOps):
            self.tell("\n".join(notice_lines(ev)), False)
        elif isinstance(ev, CaptureState) and ev.state in ("refused", "failed"):
            who = f"pid {ev.pid}: " if ev.pid else ""
            self.tell(f"capture {ev.state}: {who}{ev.reason}", True)


def ask_in_background(path: str, steps: int, by: str, tell: Callable[[str, bool], object]) -> str:
    """An attached viewer's capture: asked through the session's control connection, on a
    thread of its own (the app's loop never waits)."""
    from perftop.monitor.capture import request

    def run() -> None:
        try:
            request(path, steps, by, Teller(tell), 60.0 + steps)
        except PerftopError as exc:
            tell(f"capture failed: {exc}", True)

    threading.Thread(target=run, name="perftop-capture-ask", daemon=True).start()
    return f"capturing the next {steps} steps…"


def capture_lines(cap: CaptureOps, top: int = 5) -> list[str]:
    """A capture in a few lines: steps, cost, the top ops with phase and user function."""
    lines = [f"pid {cap.pid}: {steps_text(cap.first_step, cap.steps)} captured, "
             f"{fmt_seconds(cap.step_s)}/step, {_cost(cap)}"]  # fmt: skip
    for op in ops_of(cap)[:top]:
        where = f"  {op.where}" if op.where else ""
        t = fmt_seconds(op.self_s + op.device_s)
        lines.append(f"  {op.name:<28} {op.phase:<9} {t:>8}/step  ×{op.calls:.3g}{where}")
    if cap.trace:
        lines.append(f"  trace: {cap.trace}")
    return lines


def notice_lines(cap: CaptureOps, top: int = 3) -> list[str]:
    """The same, narrow enough for a notice in the TUI."""
    lines = [f"pid {cap.pid}: {steps_text(cap.first_step, cap.steps)}, {_cost(cap)}"]
    for op in ops_of(cap)[:top]:
        where = f" {op.where}" if op.where else ""
        lines.append(f"{op.phase} {op.name} {fmt_seconds(op.self_s + op.device_s)}{where}")
    if cap.trace:
        lines.append(f"trace: {Path(cap.trace).name}")
    return lines


def _cost(cap: CaptureOps) -> str:
    return cost_text(done_part(cap))  # the model's one cost, as the Ops panel says it
