"""The loops the compiled step tracker is profiled on when it is built (``setup.py``: GCC's
profile-guided optimization), with no torch: the tracker's own pass-throughs and hooks
around plain Python stand-ins for a DataLoader iterator's ``__next__``, ``backward()`` and
an optimizer's ``step``, in the shapes the hook meets most.

Why: each step enters the tracker three times between long stretches of torch's own code,
which leave none of perftop's code in the instruction cache. What a step costs is then
mostly how many cache lines of code it runs through, and the compiled functions mix their
few hot lines with the cold ones (error paths, first steps, rare shapes). A build profiled
on these loops lays each function out hot path first, the rest after it (each function
whole: ``setup.py`` says why): measured inside one process
(``benchmarks/hook_inprocess.py``) that takes about half a microsecond off a step.

What runs is the hot path of a real job: a fresh tracker learns each loop's shape from its
first steps, the ring is drained as the sender drains it, and the sync detector's callback
is there. The shapes, by weight: DataLoader, backward, optimizer (most jobs); a feeder
(no DataLoader: the forward's timer armed at each step); gradient accumulation; backward
with a manual update; ``perftop.step()``.

    python -m perftop.hook.steps_train EXTENSION [STEPS]
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

from perftop.hook import ring

# (loader, backwards a step, optimizer, explicit step, weight)
SHAPES = (
    (True, 1, True, False, 6),
    (False, 1, True, False, 2),
    (True, 4, True, False, 1),
    (True, 1, False, False, 1),
    (True, 1, False, True, 1),
)
DRAIN_EVERY = 300  # steps between two reads of the ring, about a quarter second's


class _Batches:
    """A DataLoader iterator: ``__next__`` is wrapped on the class, as perftop wraps
    ``_BaseDataLoaderIter.__next__``; the last call of an epoch raises StopIteration."""

    def __init__(self, n: int, loader: object) -> None:
        self.left = n
        self.loader = loader  # which loader (the tracker's ``on_iter`` reads it)

    def _next(self) -> int:
        if self.left == 0:
            raise StopIteration
        self.left -= 1
        return self.left


def _loader_of(it: _Batches) -> object:
    return it.loader


class _Optimizer:
    def _step(self, *args: Any, **kwargs: Any) -> None:
        return None


def _backward(tensors: Any, *args: Any, **kwargs: Any) -> None:
    return None


def _hooked_step(pre: Any, post: Any) -> Any:
    """An optimizer class's step as torch wraps it: the global hooks around the step."""

    def step(self: Any, *args: Any, **kwargs: Any) -> None:
        pre(self, args, kwargs)
        _Optimizer._step(self)
        post(self, args, kwargs)

    return step


def run(mod: Any, loader: bool, backwards: int, optimizer: bool, explicit: bool, steps: int) -> int:
    """``steps`` steps of one shape through a fresh tracker of ``mod``; the steps it closed."""
    tr = mod.StepTracker(lambda rec: None)
    tr.on_iter = _loader_of
    tr.ring_cap = 4096
    tr.on_step = lambda index, t: index + 100  # the sync detector, asleep between samples
    tr.on_arm = lambda: None  # the forward's timer behind a feeder
    batches = type("Batches", (_Batches,), {})
    batches.__next__ = tr.wrap_next(_Batches._next, lambda: True)  # type: ignore[attr-defined]
    opt_cls = type("Optimizer", (_Optimizer,), {})
    opt_cls.step = _hooked_step(tr.opt_pre_hook, tr.opt_post_hook)  # type: ignore[attr-defined]
    backward = tr.wrap_backward(_backward)
    opt, data = opt_cls(), object()
    done = 0
    while done < steps:
        it = batches(min(500, steps - done), data) if loader else None
        while done < steps:
            if it is not None and next(it, None) is None:
                break  # the epoch's end: a new iterator
            for _ in range(backwards):
                backward(None)
            if optimizer:
                opt.step()
            if explicit:
                tr.explicit(tr.clock())
            done += 1
            if done % DRAIN_EVERY == 0:
                ring.take(tr, 1 << 20)
    tr.flush()
    return int(tr.index)


def main(argv: list[str]) -> int:
    path, steps = argv[0], int(argv[1]) if len(argv) > 1 else 20000
    name = Path(path).name.split(".")[0]  # _steps_fast: its init function's name
    spec = importlib.util.spec_from_file_location(f"perftop.hook.{name}", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"not an extension: {path}")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    total = sum(w for *_, w in SHAPES)
    for loader, backwards, optimizer, explicit, weight in SHAPES:
        n = steps * weight // total
        closed = run(mod, loader, backwards, optimizer, explicit, n)
        if closed < n - 2:
            raise SystemExit(f"the tracker closed {closed} of {n} steps")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
