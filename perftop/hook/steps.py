"""Finding step boundaries in any training loop, cheaply, on the training thread.

What ends a step, strongest first: an explicit ``perftop.step()``; the step of the first
optimizer that ever steps (later ones, as in a GAN, add to the optimizer phase); a
``backward()``; a DataLoader batch. The strongest source seen so far wins. Weaker sources
close a step lazily, at the start of the next activity, so a loop whose first iteration
reveals an optimizer only after its backward is not counted twice, and a manual SGD update
after ``backward()`` stays in its own step.

Every method takes ``time.perf_counter()`` stamps and does a few attribute updates: this
is the hot path, kept within a few microseconds per step.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

NONE, LOADER, BACKWARD, OPTIMIZER, EXPLICIT = 0, 1, 2, 3, 4
SOURCES = ("", "loader", "backward", "optimizer", "explicit")


class StepTracker:
    __slots__ = (
        "emit",
        "mode",
        "index",
        "start",
        "data",
        "bwd",
        "opt",
        "phases",
        "has_fetch",
        "has_bwd",
        "primary_opt",
        "opt_t0",
        "on_close",
        "on_step",
        "on_fetched",
        "last_end",
    )

    def __init__(self, emit: Callable[[tuple[Any, ...]], None]) -> None:
        self.emit = emit
        self.on_close: Callable[[int, float], None] | None = None  # CUDA timer, if any
        self.on_step: Callable[[int, float], None] | None = None  # sync detection, if any
        self.on_fetched: Callable[[], None] | None = None
        self.reset()

    def reset(self) -> None:
        self.mode = NONE
        self.index = 0
        self.start: float | None = None
        self.primary_opt: int | None = None
        self.opt_t0 = 0.0
        self.last_end = 0.0
        self._clear()

    def _clear(self) -> None:
        self.data = self.bwd = self.opt = 0.0
        self.phases: dict[str, float] | None = None
        self.has_fetch = self.has_bwd = False

    def close(self, t: float) -> None:
        """End the current step at ``t`` and start the next one there."""
        if self.start is not None:
            self.emit(
                (
                    self.index,
                    self.start,
                    t,
                    self.data,
                    self.bwd,
                    self.opt,
                    self.phases,
                    SOURCES[self.mode],
                )
            )
            if self.on_close is not None:
                self.on_close(self.index, t)
            if self.on_step is not None:
                self.on_step(self.index, t)
            self.index += 1
        self.start = t
        self._clear()

    def _activity(self, t: float) -> None:
        if self.start is None:
            self.start = t
        elif (self.mode == LOADER and self.has_fetch) or (self.mode == BACKWARD and self.has_bwd):
            self.close(t)

    # -- sources -----------------------------------------------------------------------
    def fetched(self, t0: float, t1: float) -> None:
        """A DataLoader ``__next__`` that ran from ``t0`` to ``t1``."""
        if self.mode < LOADER:
            self.mode = LOADER
        self._activity(t0)
        self.data += t1 - t0
        self.last_end = t1
        if not self.has_fetch:
            self.has_fetch = True
            if self.on_fetched is not None:
                self.on_fetched()

    def backward(self, t0: float, t1: float) -> None:
        if self.mode < BACKWARD:
            self.mode = BACKWARD
        self._activity(t0)
        self.bwd += t1 - t0
        self.has_bwd = True
        self.last_end = t1

    def optimizer_pre(self, t0: float) -> None:
        self.opt_t0 = t0
        if self.start is None:
            self.start = t0

    def optimizer_post(self, opt_id: int, t1: float) -> None:
        self.opt += t1 - self.opt_t0
        if self.primary_opt is None:
            self.primary_opt = opt_id
        if self.mode < OPTIMIZER:
            self.mode = OPTIMIZER
        if self.mode == OPTIMIZER and opt_id == self.primary_opt:
            self.close(t1)

    def explicit(self, t: float) -> None:
        """``perftop.step()``: the user says where a step ends."""
        self.mode = EXPLICIT
        self.close(t)

    def phase(self, name: str, dt: float) -> None:
        if self.start is None:
            return
        if self.phases is None:
            self.phases = {}
        self.phases[name] = self.phases.get(name, 0.0) + dt

    def flush(self) -> None:
        """At exit: a step left open by a lazy source ends where its last activity did."""
        if self.start is not None and (
            (self.mode == LOADER and self.has_fetch) or (self.mode == BACKWARD and self.has_bwd)
        ):
            self.close(max(self.last_end, self.start))
