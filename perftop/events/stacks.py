"""Stack events: what a process's Python threads were doing, read from outside with py-spy.

Standard library only. A frame is ``(function, file, line)``, innermost first. Samples
come from the observer (a low-rate sampler) and from stall capture (stacks dumped while a
step is stalled), so a recording keeps both and a report can rank frames by share.
"""

from __future__ import annotations

from perftop.events.base import Event, event

# (function, file, line)
StackFrame = tuple[str, str, int]
# A stall's stacks are dumped no sooner than this after its start (``t - stalled_s``): the
# stall watch's least length, and what tells the stalled step from steps ended before it.
MIN_STALL_S = 2.0


@event("stack")
class StackSample(Event):
    """One process's main Python thread at one moment (``frames`` innermost first).

    ``role`` is what the sampler knew the process to be (``main``, ``rank``, ``worker``,
    ``child``); ``thread`` names the thread sampled; ``idle`` is py-spy's verdict that the
    thread was not running (waiting on a lock, a queue, I/O or a sleep)."""

    t: float
    pid: int
    role: str
    frames: tuple[StackFrame, ...] = ()
    thread: str = ""
    idle: bool = False


@event("stall")
class StallCapture(Event):
    """A step of ``pid`` ran ``stalled_s`` seconds (median ``median_s``) when the stacks
    of the job's processes were dumped; ``stacks`` holds ``(pid, role, frames)``. With
    ``during`` (``eval``, ``checkpoint``) it is no step but an interval outside training steps
    that hangs: ``stalled_s`` long, ``median_s`` the mean of that kind's earlier ones (0:
    none before)."""

    t: float
    pid: int
    step: int
    stalled_s: float
    median_s: float
    stacks: tuple[tuple[int, str, tuple[StackFrame, ...]], ...] = ()
    note: str = ""  # why some stacks are missing (no permission, py-spy absent)
    during: str = ""  # appended: an evaluation or checkpoint that hangs, not a step
    dump_s: float = 0.0  # appended: what the dumps took (they began at t - dump_s; 0: not said)
    # appended: (pid, state) of each process dumped that was held where it stood, in
    # psutil's words (HELD_STATES); the others ran or slept as processes do
    states: tuple[tuple[int, str], ...] = ()


# A process in one of these states makes no progress whatever its code does: stopped (a
# SIGSTOP, a shell's Ctrl-Z, a job scheduler's suspend), stopped by a tracer (a debugger),
# or in uninterruptible sleep (a disk, a network filesystem, a driver).
HELD_STATES = ("stopped", "tracing-stop", "disk-sleep")


@event("observer")
class ObserverStart(Event):
    """The monitor watches a process it did not start and that has no hook: only outside
    views (process tree, host, GPUs, stack samples) exist for this session."""

    t: float
    pid: int
    python: str = ""  # the target's Python version where known ("3.11.7")
