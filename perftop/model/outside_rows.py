"""The rows of what a job did that its steps' timings do not say: intervals between steps
(an evaluation, a checkpoint), its processes' sampled stacks, and stalled steps with the
stacks captured then (importers name them from :mod:`perftop.model.snapshot` too)."""

from __future__ import annotations

from dataclasses import dataclass

from perftop.model.job_rows import Role


@dataclass(frozen=True, slots=True)
class BetweenRow:
    """Time spent outside training steps, by kind (``eval``, ``checkpoint``, ``other``):
    the whole run's total and count, and the latest interval."""

    kind: str
    total_s: float = 0.0
    count: int = 0
    last_t0: float | None = None
    last_t1: float | None = None
    host: str = ""  # set where a collector merges nodes
    # Passes a forward with grad off opened (no loader): the user's function that made
    # their first module call, the one that held the most of this kind's time
    # (``estimate_loss (train.py:120)``), and its share of the kind's time.
    site: str = ""
    site_s: float = 0.0
    # Time inside top-level forward calls, over the intervals where it was measured
    # (``measured_s`` of them; 0 where none was).
    forward_s: float = 0.0
    measured_s: float = 0.0


@dataclass(frozen=True, slots=True)
class StackRow:
    """One process's stack samples: ``where`` (what it was doing, in words) and ``frames``
    (innermost user frames as (function, file, line)), each with its share of ``samples``."""

    pid: int
    role: Role
    samples: int
    where: tuple[tuple[str, float], ...] = ()
    frames: tuple[tuple[tuple[str, str, int], float], ...] = ()


@dataclass(frozen=True, slots=True)
class StallRow:
    """Stacks captured while a step of ``pid`` was stalled: ``(pid, role, frames)`` each."""

    t: float
    pid: int
    step: int
    stalled_s: float
    median_s: float
    stacks: tuple[tuple[int, str, tuple[tuple[str, str, int], ...]], ...] = ()
    note: str = ""
    during: str = ""  # "eval" or "checkpoint": an interval between steps that hangs
    host: str = ""  # the node whose perftop dumped them (a collector's; "" on one machine)
    dump_s: float = 0.0  # what the dumps took: they began at t - dump_s (0: not said)
    states: tuple[tuple[int, str], ...] = ()  # (pid, state): those held where they stood

    def state_of(self, pid: int) -> str:
        """``pid``'s state when dumped where it was held (``HELD_STATES``), else ""."""
        return next((s for p, s in self.states if p == pid), "")
