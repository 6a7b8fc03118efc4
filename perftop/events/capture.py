"""On-demand op capture: a request for ``torch.profiler`` over the next N whole steps, the
hook's answer, and the ops summary it sends back. Standard library only (the hook imports it).

The request travels from the monitor to the hook on the hook's own socket (the one place
an event flows that way); the answers flow back with the rest of the stream and are
recorded like any event, so a replay shows each capture at its step.
"""

from __future__ import annotations

from typing import Any

from perftop.events.base import Event, event

# One op of a capture, per step of the capture (all times in seconds):
# (name, phase, calls_per_step, self_cpu_s, device_s, shapes, file, line, function).
# ``phase`` is one of PHASES; ``device_s`` is the op's kernels' device time (0.0 on a CPU
# run); ``shapes`` the most frequent input shapes as text ("[64, 784], [784, 256]", "" when
# none were recorded); file/line/function: the function of the user's code that called it,
# with its first line (torch's profiler records calls, not lines; "" / 0 unknown).
OpRow = tuple[Any, ...]
PHASES = ("data", "forward", "backward", "optimizer", "between")


@event("capture_ask")
class CaptureAsk(Event):
    """Monitor to hook: profile the next ``steps`` whole steps. The hook writes the full
    trace to ``{trace_prefix}{pid}.trace.json`` (beside the recording, or in the private
    socket directory; "" for none); ``by`` says who asked (``tui``, ``trace``, ``attach``)."""

    t: float
    capture_id: str
    steps: int
    trace_prefix: str = ""
    by: str = ""


@event("capture_state")
class CaptureState(Event):
    """Hook to monitor: where a capture stands. ``state`` is ``asked`` (the monitor sent
    it), ``started`` (at the boundary before ``first_step``), ``refused`` or ``failed``
    (``reason`` says why in one line), or ``done`` (its :class:`CaptureOps` follows).
    ``pid`` 0 is the monitor itself (``asked``, or refused before reaching any hook)."""

    t: float
    pid: int
    capture_id: str
    state: str
    reason: str = ""
    first_step: int = -1
    steps: int = 0


@event("capture_ops")
class CaptureOps(Event):
    """The summary of one finished capture of one process.

    Steps ``first_step`` .. ``first_step + steps - 1`` were captured. ``step_s`` is their
    mean duration and ``before_s`` the median of the ``before_n`` steps just before (up to
    20; the capture's cost is their difference, with ``after_s`` spread over its steps;
    0.0 when there were none). ``phase_s`` maps each phase to its seconds
    per step during the capture; ``ops`` are the top :data:`OpRow`s by self time (per step)
    and ``more_ops`` how many smaller ones were left out. ``device`` maps a phase to
    ``(kernel_s, memcpy_s, idle_s)`` per step on the accelerator (empty on a CPU run).
    ``trace`` is the path of the full Chrome/Perfetto trace ("" when none was written) and
    ``clock_offset_us`` what to add to its timestamps to get epoch microseconds (the
    ``time.time()`` clock of every other event)."""

    t: float
    pid: int
    capture_id: str
    first_step: int
    steps: int
    step_s: float
    before_s: float
    phase_s: dict[str, float]
    ops: tuple[OpRow, ...] = ()
    more_ops: int = 0
    device: dict[str, tuple[float, float, float]] | None = None
    trace: str = ""
    clock_offset_us: float = 0.0
    before_n: int = 0  # the steps ``before_s`` rests on (0: an older hook's 2-step mean)
    # The steps just after the capture, while its summary and trace were made (a thread
    # that shares the interpreter with the training one): what they took over ``before_s``
    # in all (seconds), and how many they were (0: none counted, or an older hook).
    after_s: float = 0.0
    after_n: int = 0
    # the spread of the steps ``before_s`` rests on: 1.4826 times their median absolute
    # deviation (a standard deviation a slow save step moves little; 0.0: under 3 steps,
    # or an older hook), what the cost's error is made of
    before_sd_s: float = 0.0
