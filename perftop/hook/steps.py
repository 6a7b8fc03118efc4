"""Finding step boundaries in any training loop, cheaply, on the training thread.

What ends a step, strongest first: an explicit ``perftop.step()``; an optimizer step (one
per ``optimizer.step()``, closure or not; a GAN's second optimizer adds to the step of the
first); a ``backward()`` (or, in loops without one, ``torch.autograd.grad``; a backward
inside another, reentrant checkpointing, counts once); a DataLoader batch. Weaker sources close a step lazily, at the
start of the next activity, so a manual SGD update after ``backward()`` stays in its step.
Until an optimizer or an explicit step is seen, steps of the weaker sources are held back
(``HOLD_STEPS`` steps, never a time: however long the first update takes to come, the
count of steps is the same) and merged into the optimizer's step if one comes, as after
the micro-batches of gradient accumulation; batches fetched before the
first ``backward()`` (one a prefetcher fetches ahead) are merged into its step.

The training thread is the one calling backward, the optimizer or ``perftop.step()``:
batches fetched on another thread (a producer filling a queue) are prefetched, not
waited for, and the loop's own wait is then not seen (steps carry ``-0.0`` data).

Time outside training steps (an evaluation pass, a checkpoint) is cut out of the steps and
reported as its own intervals: see ``gaps.py`` for the signals. The rare paths (held
steps, a second optimizer, closures) are in ``steps_cold.py``.

The one implementation: ``setup.py`` also compiles this file with Cython (types in
``_steps_fast.pxd``) into ``perftop.hook._steps_fast``; ``impl.py`` picks one. Methods take
``time.perf_counter()`` stamps; this is the hot path, a few attribute updates per call.
"""

from __future__ import annotations

import mmap
import os
import threading
import time
from collections.abc import Callable
from typing import Any

from perftop.hook import gap_regions, gaps
from perftop.hook import passthrough as plain
from perftop.hook import steps_cold as cold
from perftop.wire import STEP_SOURCES

NONE, LOADER, BACKWARD, OPTIMIZER, EXPLICIT = 0, 1, 2, 3, 4
SOURCES = STEP_SOURCES  # index = mode
HOLD_STEPS = 64
# A new loader's next batch fetched this soon after its first, nothing in between: read
# ahead by a prefetching wrapper, not an evaluation's next batch (work comes between those)
_INF = float("inf")
# The ring the sender reads steps from (ring.py): a step is the wire's record (STEP_RECORD,
# 53 bytes: its size, checked by a test), the source byte plus PHASED where the step has
# phases (kept in ``ring_phases``), its times in epoch seconds already.
RING_REC = 53
PHASED = 128
_perf = time.perf_counter
# The C primitives of the compiled build (``_steps_fast.h``, declared in the .pxd): the
# clock, a pass-through that passes its caller's arguments on by vectorcall, a hook that
# calls a compiled function directly, grad mode from c10's flag, a weak reference read.
# Here, their plain twins (passthrough.py). Set through globals(): compiled, the names
# are C functions and these module attributes are never read.
_now: Callable[[], float]
_passthrough: Callable[[Any, Any, Any, str], Any]
_hook: Callable[[Any, Any, str], Any]  # _hook(tr, f, where): h(a, b, c) calls f(tr, a, b, c)
_grad: Callable[[Any], bool]  # _grad(torch.is_grad_enabled)
_grad_resolve: Callable[[str], bool]
_grad_forget: Callable[[], None]
_refers: Callable[[Any, Any], bool]
_thread: Callable[[], int]  # the calling thread's identity (threading.get_ident)
_passthrough_outer: Callable[[Any, Any, Any, str], Any]  # done for the outermost call only
_ring_ptr: Callable[[Any], Any]  # where the ring's bytes are stored
_ring_store: Callable[..., None]  # one step record into the ring (wire.STEP_RECORD)
globals().update(plain.PRIMITIVES)


def ring_buffer(capacity: int) -> Any:
    """``capacity`` step records' worth of zero bytes in a private anonymous mapping (see
    ring.py: pages are touched only as steps are written; a fork's child has its own)."""
    size = capacity * RING_REC
    flags = getattr(mmap, "MAP_PRIVATE", 0)
    return memoryview(mmap.mmap(-1, size, flags=flags) if flags else mmap.mmap(-1, size))


def _grad_on() -> bool:
    return True


def _cap(x: float, dur: float) -> float:
    """No phase is longer than its step."""
    return 0.0 if x < 0.0 else (dur if x > dur else x)


class StepTracker:
    def __init__(self, emit: Callable[[tuple[Any, ...]], None]) -> None:
        self.emit = emit
        self.on_close: Callable[[int, float], None] | None = None  # CUDA timer, if any
        # Sync detection, if any: called at step ends on the training thread (the one of
        # backward, the optimizer, perftop.step()), returns the next index it needs.
        self.on_step: Callable[[int, float], int | None] | None = None
        self.on_fetched: Callable[[], None] | None = None
        self.on_settle: Callable[[], None] | None = None  # first step out: start the sender
        self.on_error: Callable[[str], None] | None = None
        self.on_between: Callable[[str, float, float], None] | None = None  # kind, t0, length
        self.on_open: Callable[[str, float], None] | None = None  # kind, t0: one began
        self.on_arm: Callable[[], None] | None = None  # arms the one-shot forward pre-hook
        # watching(t): True where that pre-hook still waits for the next module call (none
        # came since the step's end), False where it fired after ``t``, None where not
        # known (it fired before ``t``, or it is off since dynamo compiles); None: no such
        # hook (tests)
        self.watching: Callable[[float], bool | None] | None = None
        # opt.step(closure) began: the wait before the closures' forwards ends there
        self.on_closure: Callable[[], None] | None = None
        # A DataLoader iterator met for the first time: which loader it iterates (its
        # number, torch_patch.py); None: not known
        self.on_iter: Callable[[Any], Any] | None = None
        # Where the training thread sends (the sender's solo mode, solo.py): a step that
        # ends at or after ``flush_at`` calls ``on_flush``; never while it is INF.
        self.on_flush: Callable[[], None] | None = None
        self.flush_at = _INF
        self.grad_enabled: Callable[[], bool] = _grad_on  # torch.is_grad_enabled, once patched
        self.clock = _perf  # for closures (tests give their own)
        # torch's global optimizer hooks, called as hook(opt, args, kwargs)
        self.opt_pre_hook = _hook(self, _opt_pre, "optimizer pre-hook")  # noqa: F821
        self.opt_post_hook = _hook(self, _opt_post, "optimizer post-hook")  # noqa: F821
        self.ring_cap = 0
        self.ring_off = 0.0  # perf_counter -> epoch seconds, for the records' times
        self.ring_buf: Any = None  # made at the first step written: a process that never
        # trains (a DataLoader worker) maps nothing; ``ring``: where its bytes are stored
        self.reset()

    def reset(self) -> None:
        self.mode = NONE
        self.index = 0
        self.running = False  # a step is open, from ``start``
        self.start = 0.0
        self.primary: Any = None  # weakref to the optimizer whose steps close steps
        # (weakref to the last DataLoader iterator seen, its loader): one attribute lookup
        # per iterator, not per batch; one tuple, so that another thread never sees half.
        self.last_it: tuple[Any, Any] = (None, None)
        self.mark: Any = None  # (weakref, t, data, bwd, opt, hole): another's last step
        self.in_opt: Any = None  # the optimizer inside its step(), between the hooks
        self.opt_t0 = self.closure_s = 0.0
        self.closure_depth = 0
        self.last_end = 0.0
        self.held: list[tuple[Any, ...]] = []
        self.held_fetch = False  # a held step fetched a DataLoader batch (merge_held)
        self.settled = False
        self.step_hook_at = 0
        gaps.reset(self)
        self.data = self.bwd = self.opt = self.hole = 0.0
        self.phases: dict[str, float] | None = None
        self.has_fetch = self.has_bwd = False
        self.thread = 0  # the training thread (its backward, optimizer, perftop.step())
        self.main_thread = threading.main_thread().ident or 0
        self.fetch_thread = 0  # the thread of the batches fetched before training was seen
        self.blind = False  # batches came from another thread: the loop's waits are unseen
        self.bwd_seen = False  # a backward() was seen: autograd.grad calls add time only
        self.region = None  # the no_grad context that opened the open interval, if one did
        # Feeders (a queue filled by another thread, a generator): the training thread's
        # time off the CPU before the step's forwards (first_forward.py), or -1 unseen.
        # ``timing``: this step's forwards are timed (its last step fetched nothing).
        self.fwd_wait = -1.0
        self.timing = False
        self.multi_bwd = False  # a step had several backwards (accumulation, a GAN)
        # The ring the sender reads the steps from (ring.py), written from ring_r up to
        # ring_w (counts of steps; ring_cap 0: no ring, steps go to ``emit``).
        self.ring_r = self.ring_w = 0
        self.ring_phases: dict[int, dict[str, float]] = {}  # step index -> its phases
        self.ring_pid = os.getpid()  # the records' pid (a fork's child: its own)

    def close(self, t: float) -> None:
        """End the current step at ``t`` and start the next one there."""
        if self.running:
            dur = t - self.start - self.hole  # a gap inside the step is cut out of it
            bwd, opt = _cap(self.bwd, dur), _cap(self.opt, dur)
            # The data wait at most what backward and the optimizer leave: a fetch whose
            # start a cut-out interval moved behind the step's start is over it.
            room = _cap(dur - bwd - opt, dur)
            # -0.0: the loop's data wait was not seen (it counts as 0.0 everywhere; the
            # model shows the figure as absent). No fetch on the training thread: the wait
            # before the step's first forward, where it was measured.
            if self.has_fetch or self.fwd_wait < 0.0:
                data = -0.0 if self.blind and not self.has_fetch else _cap(self.data, room)
            else:
                data = _cap(self.fwd_wait, room)
            if self.settled:
                self.push(self.index, self.start + self.hole, t, data, bwd, opt, self.phases,
                          self.mode)  # fmt: skip
            else:
                if self.has_fetch:  # a part of a step to come fetched its batches
                    self.held_fetch = True
                self._hold((self.index, self.start + self.hole, t, data,  # wire.REC_* order
                            bwd, opt, self.phases, SOURCES[self.mode]), t)  # fmt: skip
            if self.on_close is not None:
                self.on_close(self.index, t)
            if (
                self.on_step is not None
                and self.index >= self.step_hook_at
                and _thread() == self.thread  # noqa: F821
            ):
                # The callback says when it next needs to run (sync detection sleeps
                # between samples): an int compare on the steps in between. It runs on
                # the training thread only: what it starts (the detector's mode, on this
                # thread's function-mode stack; a capture) watches the thread it runs on,
                # and a feeder's batches close steps on the feeder's thread before
                # training is seen (then on_step waits for the training thread's step).
                self.step_hook_at = self.on_step(self.index, t) or 0
            self.index += 1
            if t >= self.flush_at and self.on_flush is not None:
                self.on_flush()
        self.running = True
        self.start = t
        self.data = self.bwd = self.opt = self.hole = 0.0
        self.phases = None
        self.fwd_wait = -1.0
        # No DataLoader fetch in the last step: time the next forward. Where backward()
        # ends steps, the backward that ends one arms it when it returns (backward_like).
        # Armed at every step end: the next forward with grad off may begin a pass.
        # (Nor where a held part fetched: a step's micro-batches all fetched before its
        # first forward, as the HF Trainer does; its later forwards wait for no batch.)
        self.timing = not self.has_fetch and self.mode >= BACKWARD and not self.held_fetch
        if self.mode >= OPTIMIZER and self.on_arm is not None:
            self.on_arm()
        self.has_fetch = self.has_bwd = False

    def push(self, index: float, t0: float, t1: float, data: float, bwd: float, opt: float,
             phases: Any, source: float) -> None:  # fmt: skip
        """A step out: stored in the ring the sender reads (``ring.py``), as the wire's record,
        or handed to ``emit`` where no ring is attached. ``index`` and ``source`` (the
        mode's number) come as doubles (the compiled build's one number type here)."""
        if self.ring_cap == 0:
            self.emit((int(index), t0, t1, data, bwd, opt, phases, SOURCES[int(source)]))
            return
        w = self.ring_w
        if w == self.ring_r:  # all read: from the start again, where the lines are warm
            w = self.ring_w = 0  # the writer's count first: a reader then sees nothing new
            self.ring_r = 0
        elif w - self.ring_r >= self.ring_cap:
            return  # full: dropped, counted by the sender from the gap in the indices
        if self.ring_buf is None:
            self.ring_buf = ring_buffer(self.ring_cap)
            self.ring = _ring_ptr(self.ring_buf)  # noqa: F821
        if phases is not None:
            self.ring_phases[int(index)] = phases
            source += PHASED
        _ring_store(self.ring, (w % self.ring_cap) * RING_REC, self.ring_pid, index,  # noqa: F821
                    t0 + self.ring_off, t1 + self.ring_off, data, bwd, opt, source)  # fmt: skip
        self.ring_w = w + 1  # last: the step is there for a reader once it is counted

    def active(self) -> bool:
        """Whether the open step has seen anything yet."""
        return self.has_fetch or self.has_bwd or self.opt > 0.0 or self.phases is not None

    def lazy_close(self, t: float) -> None:
        """Where a weaker source's step ends: at the start of the next activity."""
        if (self.mode == LOADER and self.has_fetch) or (self.mode == BACKWARD and self.has_bwd):
            self.close(t)

    def _hold(self, step: tuple[Any, ...], t: float) -> None:
        held = self.held
        held.append(step)
        if len(held) >= HOLD_STEPS:
            cold.release(self)

    # -- sources: the hot path -------------------------------------------------------------
    def fetched(
        self, t0: float, t1: float, got_batch: bool = True, loader: Any = None, grad: bool = True
    ) -> None:
        """A DataLoader ``__next__`` from ``t0`` to ``t1`` (the call that ends an epoch has
        ``got_batch`` False); ``loader`` says which loader, ``grad`` whether grad was on."""
        tid = _thread()  # noqa: F821
        if tid != self.thread:
            if self.thread != 0:
                # Fetched on another thread (a producer): prefetched, not waited for; what
                # the loop waits on instead is not seen, until it fetches itself again.
                self.blind = True
                return
            self.fetch_thread = tid
        elif self.blind:
            self.blind = False
        self.last_end = t1
        if not grad:  # no_grad / inference_mode: not a training batch
            if self.pend:
                gaps.pending_was_eval(self)
            gaps.eval_batch(self, t0, t1)
            return
        if loader is not None and loader is not self.train_last:
            if loader in self.train_loaders:
                self.train_last = loader  # loaders never leave the set: the same one is in
            elif self.train_loaders or self.mode >= BACKWARD:
                # A loader that never fed training: an evaluation, or the next training one
                # (also where training goes on with no loader of its own: a feeder's).
                if (
                    self.pend
                    and loader is self.pend_loader
                    and self.cand is None
                    and gaps.read_ahead(self, t0)
                ):
                    # its next batch at once, nothing in between: read ahead (a prefetching
                    # wrapper over a loader made anew each epoch), not an evaluation's
                    self.pend_t1, self.pend_got = t1, self.pend_got or got_batch
                    return
                if self.pend:
                    gaps.pending_was_eval(self)
                self.lazy_close(t0)
                gaps.pend_fetch(self, t0, t1, got_batch, loader)
                return
            else:  # before any training: loaders for training to confirm
                cold.loader_seen(self, loader, got_batch, t1)
        if (self.in_gap or self.pend) and gaps.train_fetch(self, t0, t1, got_batch, loader):
            return  # a pass's batch, or one that may be (pending: what follows decides)
        mode = self.mode
        if mode == NONE:
            self.mode = mode = LOADER
        if not self.running:
            self.running = True
            self.start = t0
        elif (mode == LOADER and self.has_fetch) or (mode == BACKWARD and self.has_bwd):
            self.close(t0)
        self.data += t1 - t0
        if got_batch and not self.has_fetch:
            self.has_fetch = True
            if self.on_fetched is not None:
                self.on_fetched()

    def first_forward(self, wait: float) -> None:
        """A forward's first module call on the training thread, ``wait`` seconds off the
        CPU since the timer was armed (the step's start, a backward's end, a pass's end)."""
        if self.running and not self.in_gap and not self.has_fetch:
            self.fwd_wait = wait + (self.fwd_wait if self.fwd_wait > 0.0 else 0.0)

    def backward(self, t0: float, t1: float) -> None:
        if _thread() != self.thread:  # noqa: F821
            cold.train_thread(self, _thread())  # noqa: F821
        self.bwd_seen = True
        self.backward_like(t0, t1)

    def grads(self, t0: float, t1: float) -> None:
        """A ``torch.autograd.grad`` call: a step source as backward() is, in loops without
        backward() (functional training); in others (a gradient penalty) time only."""
        if _thread() != self.thread:  # noqa: F821
            cold.train_thread(self, _thread())  # noqa: F821
        if not self.bwd_seen:
            self.backward_like(t0, t1)
        elif self.running and not self.in_gap:
            self.bwd += t1 - t0
            self.last_end = t1

    def backward_like(self, t0: float, t1: float) -> None:
        if self.pend or self.in_gap or self.fetch_loader is not None:
            gaps.training(self, t0)
        if self.in_opt is not None and self.closure_depth == 0:
            self.in_opt = None  # an optimizer step that raised never ran its post-hook
        mode = self.mode
        if mode < BACKWARD:
            self.mode = mode = BACKWARD
            if self.held:  # batches fetched before any training (a prefetcher's): no steps
                cold.merge_held(self, False)
        if not self.running:
            self.running = True
            self.start = t0
            if self.index == 0:  # the first step: its forward's wait is timed as a later
                self.timing = not self.has_fetch  # step's is (close), if no fetch came
        elif mode == BACKWARD and self.has_bwd:
            self.close(t0)
        elif self.has_bwd:
            self.multi_bwd = True
        self.bwd += t1 - t0
        self.has_bwd = True
        self.last_end = t1
        if (
            mode == BACKWARD or (self.timing and not self.has_fetch and self.multi_bwd)
        ) and self.on_arm is not None:
            # Behind a feeder, the wait for the next forward's batch runs from this
            # backward's end: where backward() ends steps (no optimizer), the next step's
            # first (the step began at this backward's start; a manual update in between);
            # in loops with several backwards a step (learnt from the first such step),
            # a later micro-batch's (accumulation). Armed here, not inside the backward
            # (activation checkpointing's recomputed forward).
            self.on_arm()

    def optimizer_pre(self, opt: Any, t0: float, args: Any = (), kwargs: Any = None) -> Any:
        """Before ``opt.step()``; returns new (args, kwargs) when a closure is timed."""
        if self.in_opt is not None and self.in_opt is not opt:
            return None  # an optimizer's step calling another's: the outer one counts
        if _thread() != self.thread:  # noqa: F821
            cold.train_thread(self, _thread())  # noqa: F821
        self.in_opt = opt
        self.opt_t0 = t0
        self.closure_s = 0.0
        if self.pend or self.in_gap or self.fetch_loader is not None:
            if self.in_gap and self.region is not None:
                gap_regions.resumed(self, t0)
            gaps.training(self, t0)
        if not self.running:
            self.running = True
            self.start = t0
        if self.mode < OPTIMIZER:
            self.mode = OPTIMIZER
            cold.merge_held(self)
        if len(args) > 1 or kwargs:
            return cold.closure_args(self, args, kwargs)
        return None

    def optimizer_post(self, opt: Any, t1: float) -> None:
        if opt is not self.in_opt:
            return  # an inner optimizer's step
        self.in_opt = None
        d = t1 - self.opt_t0 - self.closure_s
        if d > 0.0:
            self.opt += d
        self.last_end = t1
        if self.mode != OPTIMIZER:
            return
        if _refers(self.primary, opt):  # noqa: F821
            self.mark = None
            self.close(t1)
        else:  # the first optimizer, a new one, or a GAN's second
            cold.other_optimizer(self, opt, t1)

    def _error(self, where: str) -> None:
        if self.on_error is not None:
            self.on_error(where)

    def explicit(self, t: float) -> None:
        """``perftop.step()``: the user says where a step ends."""
        if _thread() != self.thread:  # noqa: F821
            cold.train_thread(self, _thread())  # noqa: F821
        if (self.pend or self.in_gap or self.fetch_loader is not None) and gaps.training(self, t):
            return  # an interval outside training ended here: the next step starts now
        if self.mode < EXPLICIT:
            # The first call, where optimizer steps closed steps: it ends the iteration
            # whose update closed the last one (one call an iteration, as one update);
            # closing here would add a step of that iteration's tail only (a GAN's second
            # optimizer, a log line, the next batch fetched ahead: 101 steps for 100
            # calls). The next step runs from that update to the next call.
            tail = self.mode == OPTIMIZER and self.running and self.index > 0
            self.mode = EXPLICIT
            # A second optimizer's mark from then would stay for good (optimizers close
            # no step now, nor clear it): it read every step as past a GAN's second update
            # and an evaluation over the training loader as the step's forward.
            self.mark = None
            cold.merge_held(self)
            if tail:
                return
        self.close(t)

    def phase(self, name: str, t0: float, t1: float) -> None:
        """A ``perftop.phase()`` span; it also starts the first step if none has. Outside
        training steps (an evaluation) it is part of that interval."""
        if self.in_gap:
            return
        if not self.running:
            self.running = True
            self.start = t0
        if self.phases is None:
            self.phases = {}
        self.phases[name] = self.phases.get(name, 0.0) + (t1 - t0)

    def saving(self, t0: float) -> None:
        """A ``torch.save`` call begins: on training's thread, a checkpoint opens."""
        if _thread() == (self.thread or self.main_thread):  # noqa: F821
            gaps.saving(self, t0)

    def saved(self, t0: float, t1: float) -> None:
        """A ``torch.save`` call: a checkpoint is not training; on another thread than
        training's, it overlaps training steps (an async checkpoint) and cuts none."""
        tid = _thread()  # noqa: F821
        if tid != (self.thread or self.main_thread):
            if self.on_between is not None:
                self.on_between(gaps.OVERLAPPED, t0, t1 - t0)
            return
        gaps.saved(self, t0, t1)

    def no_grad(self, entered: bool, ctx: Any, t: float) -> None:
        """A forward with grad off began (or one with grad on came after it) at ``t``: at
        a step's start, an evaluation or sampling pass between steps (see gaps.py)."""
        if self.thread != 0 and _thread() != self.thread:  # noqa: F821
            return
        if entered:
            gap_regions.region_enter(self, ctx, t)
        elif ctx is self.region:
            gap_regions.region_exit(self, t)

    def flush(self) -> None:
        """At exit: a step left open by a lazy source ends where its last activity did; an
        interval outside training ends there too."""
        if self.pend:
            gaps.pending_was_eval(self)
        if self.in_gap:  # a pass after the last step (a final test): until its last work
            t = gaps.end(self, gaps.at_exit(self, max(self.clock(), self.gap_t0)))
            self.lazy_close(t)  # a step that backward() ends went on over it: it ends too
        elif self.running:  # (after its passes, where backward() ends steps)
            self.lazy_close(max(self.last_end, self.start, self.gap_t1))
        cold.release(self)

    # -- what torch calls per step: pass-throughs that call the functions below ----------
    def wrap_backward(self, orig: Any) -> Any:
        """``torch.autograd.backward``, timed."""
        return _passthrough_outer(orig, self, _backward_done, "backward")  # noqa: F821

    def wrap_grad(self, orig: Any) -> Any:
        """``torch.autograd.grad``, timed."""
        return _passthrough_outer(orig, self, _grad_done, "autograd.grad")  # noqa: F821

    def wrap_next(self, orig: Any, grad_enabled: Any) -> Any:
        """A DataLoader iterator's ``__next__``, timed; which loader, whether grad is on."""
        self.grad_enabled = grad_enabled
        return _passthrough(orig, self, _next_done, "DataLoader.__next__")  # noqa: F821

    def fast_grad(self, libc10: str) -> bool:
        """Read grad mode in C from torch's loaded libc10 (compiled build); the caller
        checks ``grad()`` against torch and calls ``slow_grad()`` if they differ."""
        return bool(_grad_resolve(libc10))  # noqa: F821

    def slow_grad(self) -> None:
        _grad_forget()  # noqa: F821

    def grad(self) -> bool:
        return bool(_grad(self.grad_enabled))  # noqa: F821


# What torch's calls end in. Their errors are caught by the pass-through or hook that
# calls them (C or passthrough.py) and reported with ``_error(where)``.
def _backward_done(tr: Any, t0: float, t1: float, ok: bool, first: Any) -> int:
    t: StepTracker = tr
    t.backward(t0, t1)
    return 0


def _grad_done(tr: Any, t0: float, t1: float, ok: bool, first: Any) -> int:
    t: StepTracker = tr
    t.grads(t0, t1)
    return 0


def _next_done(tr: Any, t0: float, t1: float, ok: bool, it: Any) -> int:
    t: StepTracker = tr
    last = t.last_it
    if _refers(last[0], it):  # noqa: F821
        loader = last[1]
    else:  # a new iterator (an epoch, another loader): which loader it iterates
        loader = cold.loader_of(t, it)
        t.last_it = (cold.weak(it), loader)
    t.fetched(t0, t1, ok, loader, _grad(t.grad_enabled))  # noqa: F821
    return 0


def _opt_pre(tr: Any, opt: Any, args: Any, kwargs: Any) -> Any:
    t: StepTracker = tr
    return t.optimizer_pre(opt, _now(), args, kwargs)  # noqa: F821


def _opt_post(tr: Any, opt: Any, args: Any, kwargs: Any) -> Any:
    t: StepTracker = tr
    t.optimizer_post(opt, _now())  # noqa: F821
    return None
