"""Finding step boundaries in any training loop, cheaply, on the training thread.

What ends a step, strongest first: an explicit ``perftop.step()``; the step of the first
optimizer that ever steps (later ones, as in a GAN, add to the optimizer phase); a
``backward()``; a DataLoader batch. The strongest source seen so far wins. Weaker sources
close a step lazily, at the start of the next activity, so a loop whose first iteration
reveals an optimizer only after its backward is not counted twice, and a manual SGD update
after ``backward()`` stays in its own step.

Until an optimizer or an explicit step has been seen, steps closed by the weaker sources
are held back (at most ``HOLD_STEPS`` steps or ``HOLD_S`` seconds): if an optimizer then
steps, as after the micro-batches of gradient accumulation, the held steps are merged into
its step instead of being counted one per micro-batch.

Every method takes ``time.perf_counter()`` stamps and does a few attribute updates: this
is the hot path, kept within a few microseconds per step.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from perftop.wire import STEP_SOURCES

NONE, LOADER, BACKWARD, OPTIMIZER, EXPLICIT = 0, 1, 2, 3, 4
SOURCES = STEP_SOURCES  # index = mode
HOLD_STEPS = 64
_perf = time.perf_counter
HOLD_S = 5.0


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
        "held",
        "settled",
        "on_settle",
        "on_error",
        "step_hook_at",
    )

    def __init__(self, emit: Callable[[tuple[Any, ...]], None]) -> None:
        self.emit = emit
        self.on_close: Callable[[int, float], None] | None = None  # CUDA timer, if any
        # Sync detection, if any: called at step ends, returns the next index it needs.
        self.on_step: Callable[[int, float], int | None] | None = None
        self.on_fetched: Callable[[], None] | None = None
        self.on_settle: Callable[[], None] | None = None  # first step out: start the sender
        self.on_error: Callable[[str], None] | None = None
        self.reset()

    def reset(self) -> None:
        self.mode = NONE
        self.index = 0
        self.start: float | None = None
        self.primary_opt: int | None = None
        self.opt_t0 = 0.0
        self.last_end = 0.0
        self.held: list[tuple[Any, ...]] = []
        self.settled = False
        self.step_hook_at = 0
        self._clear()

    def _clear(self) -> None:
        self.data = self.bwd = self.opt = 0.0
        self.phases: dict[str, float] | None = None
        self.has_fetch = self.has_bwd = False

    def close(self, t: float) -> None:
        """End the current step at ``t`` and start the next one there."""
        if self.start is not None:
            step = (self.index, self.start, t, self.data, self.bwd, self.opt, self.phases,
                    SOURCES[self.mode])  # fmt: skip
            if self.settled:
                self.emit(step)
            else:
                self._hold(step, t)
            if self.on_close is not None:
                self.on_close(self.index, t)
            if self.on_step is not None and self.index >= self.step_hook_at:
                # The callback says when it next needs to run (sync detection sleeps
                # between samples): an int compare on the steps in between.
                self.step_hook_at = self.on_step(self.index, t) or 0
            self.index += 1
        self.start = t
        self.data = self.bwd = self.opt = 0.0  # _clear(), inlined: once per step
        self.phases = None
        self.has_fetch = self.has_bwd = False

    def _hold(self, step: tuple[Any, ...], t: float) -> None:
        held = self.held
        held.append(step)
        if len(held) >= HOLD_STEPS or t - held[0][1] >= HOLD_S:
            self._release()

    def _settle(self) -> None:
        self.settled = True
        if self.on_settle is not None:
            self.on_settle()

    def _release(self) -> None:
        """No optimizer showed up in time: the weaker source's steps stand as they are."""
        self._settle()
        for step in self.held:
            self.emit(step)
        self.held = []

    def _merge_held(self) -> None:
        """A strong source appeared: the held steps were parts of the current step."""
        self._settle()
        held, self.held = self.held, []
        if not held:
            return
        self.index = held[0][0]
        self.start = held[0][1]
        self.data += sum(h[3] for h in held)
        self.bwd += sum(h[4] for h in held)
        self.opt += sum(h[5] for h in held)
        for h in held:
            for name, dt in (h[6] or {}).items():
                if self.phases is None:
                    self.phases = {}
                self.phases[name] = self.phases.get(name, 0.0) + dt

    # -- sources (the activity check is inlined in each: this is the hot path) ------------
    def fetched(self, t0: float, t1: float, got_batch: bool = True) -> None:
        """A DataLoader ``__next__`` that ran from ``t0`` to ``t1``; the call that ends an
        epoch (StopIteration) closes the step but does not start a batch."""
        mode = self.mode
        if mode == NONE:
            self.mode = mode = LOADER
        if self.start is None:
            self.start = t0
        elif (mode == LOADER and self.has_fetch) or (mode == BACKWARD and self.has_bwd):
            self.close(t0)
        self.data += t1 - t0
        self.last_end = t1
        if got_batch and not self.has_fetch:
            self.has_fetch = True
            if self.on_fetched is not None:
                self.on_fetched()

    def backward(self, t0: float, t1: float) -> None:
        mode = self.mode
        if mode < BACKWARD:
            self.mode = mode = BACKWARD
        if self.start is None:
            self.start = t0
        elif mode == BACKWARD and self.has_bwd:
            self.close(t0)
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
            self._merge_held()
        if self.mode == OPTIMIZER and opt_id == self.primary_opt:
            self.close(t1)

    # torch calls these two directly (global optimizer hooks): one Python frame each.
    def opt_pre_hook(self, opt: Any, args: Any, kwargs: Any) -> None:
        t0 = self.opt_t0 = _perf()  # optimizer_pre(), inlined: one frame less per step
        if self.start is None:
            self.start = t0

    def opt_post_hook(self, opt: Any, args: Any, kwargs: Any) -> None:
        try:
            self.optimizer_post(id(opt), _perf())
        except Exception:
            self._error("optimizer post-hook")

    def _error(self, where: str) -> None:
        if self.on_error is not None:
            self.on_error(where)

    def explicit(self, t: float) -> None:
        """``perftop.step()``: the user says where a step ends."""
        if self.mode < EXPLICIT:
            self.mode = EXPLICIT
            self._merge_held()
        self.close(t)

    def phase(self, name: str, t0: float, t1: float) -> None:
        """A ``perftop.phase()`` span; it also starts the first step if none has."""
        if self.start is None:
            self.start = t0
        dt = t1 - t0
        if self.phases is None:
            self.phases = {}
        self.phases[name] = self.phases.get(name, 0.0) + dt

    def flush(self) -> None:
        """At exit: a step left open by a lazy source ends where its last activity did."""
        if self.start is not None and (
            (self.mode == LOADER and self.has_fetch) or (self.mode == BACKWARD and self.has_bwd)
        ):
            self.close(max(self.last_end, self.start))
        self._release()
