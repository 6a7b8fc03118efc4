"""Data wait behind a feeder: the training thread's wait before each step's forwards.

A loop fed by a queue that another thread fills, a generator or a prefetcher class makes
no DataLoader fetch on the training thread, so the fetch cannot be timed. For such steps
only (steps whose last step made no fetch), the tracker arms a one-shot global forward
pre-hook at the step's start and after each backward (accumulation's later micro-batches;
where ``backward()`` ends steps, a loop without an optimizer, the next step's first): the
next module call on the training thread records how long the thread was off the CPU since
then (wall time less its CPU time) and removes the hook at once, so about one module call
per step takes ``Module._call_impl``'s slow path. Off the CPU is waiting: on a queue, a
feeder's lock or the GIL, a read, a sleep (or for a core, on a host with more runnable
threads than cores); the loop's own work before the forward (``zero_grad()``, a log line)
is not, nor is a generator's own CPU work on the training thread (it stays in the step's
time). Both clocks are read without dropping the GIL (a read of /proc/thread-self/schedstat
would drop it, and a busy feeder thread could keep the training thread waiting for it).
A pass between steps (an evaluation) takes the hook with its own module calls: its
region's exit arms it again, and the wait leaves the pass out, as the step does. Where
the pass ends is not seen (``no_grad`` is not patched): its last module call is, then the
next forward with grad on. The time off the CPU between them is the pass's own (a
metric's write, a barrier, a sleep) or the feeder's next batch; a feeder fills its queue
while the pass runs, so the wait booked there is at most the longest of the last
:data:`RECENT` waits before a step's forward, and the rest stays in the pass. A
closure's forward inside ``opt.step(closure)`` (LBFGS) counts only the wait before the
optimizer step began: the time inside it is the optimizer phase's. The job's
own hooks run as before (ours is added after its global ones, and never changes arguments
or outputs).

Never where dynamo could trace it: a model compiled in place (``Module.compile()``) or a
compiled function runs module hooks inside the compiled region, where an armed hook would
be traced and guarded on. Any compile that does not start inside a ``torch.compile(model)``
wrapper's call turns the hook off for good (before dynamo traces anything), and the
wrapper's call is itself the step's first forward: it fires and disarms before the
wrapper runs (so its warning about global hooks never shows).
"""

from __future__ import annotations

import functools
import threading
import time
from typing import Any

from perftop.hook import gaps
from perftop.hook.importwatch import after_import
from perftop.hook.pass_meter import PassMeter
from perftop.hook.state import HookState
from perftop.hook.steps import OPTIMIZER
from perftop.wire import DATA_WAIT_NOTE

RECENT = 8  # a feeder's wait after a pass: at most the longest of this many steps' waits

_perf = time.perf_counter
_cpu = time.thread_time  # this thread's CPU time: a clock read, the GIL kept


class FirstForward:
    def __init__(self, state: HookState, register: Any) -> None:
        self.state = state
        self.tracker = state.tracker
        self.register = register  # torch's register_module_forward_pre_hook
        self.handle: Any = None
        self.off = False  # dynamo compiles module calls: never armed again
        self.noted = False
        self.in_wrapper = 0  # inside a torch.compile(model) wrapper's call
        self.t0 = self.c0 = 0.0  # wall and the training thread's CPU time when armed
        self.timed = False  # the step's wait behind a feeder is timed (else grad mode only)
        self.recent = [0.0] * RECENT  # the last waits before a step's forward (a ring)
        self.recent_i = 0
        self.meter: Any = None  # pass_meter.PassMeter: what a pass this hook opened held

    def arm(self) -> None:
        """Starts the wait (again, where armed already: a new step's) on the training
        thread, where the tracker calls it."""
        if self.off:
            return
        tr = self.tracker
        if threading.get_ident() != tr.thread:
            self.disarm()  # another thread's CPU clock: this step's wait unseen
            return
        self.timed = tr.timing and not tr.has_fetch
        self.t0, self.c0 = _perf(), _cpu()
        if self.handle is None:
            try:
                self.handle = self.register(self.hook)
            except Exception:
                self.state.internal_error("forward pre-hook")
                return
        if self.timed:  # timed from here: a step with no forward after this waited for none
            tr.first_forward(0.0)

    def disarm(self) -> None:
        """Off until armed again; a pass's forward hook and profile function with it (before
        a compiled wrapper's call or a compile: dynamo must trace no hook of ours)."""
        h, self.handle = self.handle, None
        if h is not None:
            h.remove()
        if self.meter is not None and self.meter.handle is not None:
            self.meter.stop()

    def hook(self, module: Any, args: Any) -> None:
        try:
            self.fire()
        except Exception:
            self.state.internal_error("forward pre-hook")

    def fire(self) -> None:
        tr = self.tracker
        if threading.get_ident() != tr.thread:
            return  # another thread's module call (a feeder's): not the training loop's
        t = _perf()
        if tr.region is self:  # inside the pass this hook began: until grad is on again
            if not tr.grad():
                self.t0, self.c0 = t, _cpu()  # the pass's last module call so far
                if self.meter is not None:
                    self.meter.pre(t)
                return
            self.disarm()
            # The time off the CPU since the pass's last module call (a feeder's next
            # batch) is the step's wait before its forward, not the pass's.
            wait = min(max(0.0, t - self.t0 - (_cpu() - self.c0)), max(self.recent))
            tr.no_grad(False, self, t - wait)  # the pass ends (and arms again if timing)
            if self.timed:
                self.timed = False
                tr.first_forward(wait)
                self.disarm()
            return
        if self.timed:
            self.timed = False
            self.timed_wait(tr, t)
        if not tr.grad() and self.may_begin(tr):
            tr.no_grad(True, self, t)
            if tr.region is self:
                self.t0, self.c0 = t, _cpu()
                if self.meter is not None:
                    self.meter.start(t, gaps.site())
                return  # a pass began: watching for its end
        self.disarm()

    def verdict(self, length: float) -> tuple[str, str, float]:
        """The pass this hook opened ended (gaps.end): its kind, site, forwards' time."""
        if self.meter is None:
            return gaps.EVAL, "", -1.0
        return self.meter.verdict(length, gaps.EVAL)

    @property
    def rollout_sites(self) -> Any:
        """Sites whose pass was a rollout: a pass each time (gaps.region_enter)."""
        return self.meter.rollout_sites if self.meter is not None else ()

    def batch_seen(self) -> None:
        """A DataLoader batch was fetched with grad off in the pass: an evaluation's."""
        if self.meter is not None:
            self.meter.batch = True

    @staticmethod
    def may_begin(tr: Any) -> bool:
        """Whether a forward with grad off can begin a pass here: not before training, not
        inside one or inside an optimizer's step; not inside a step that an optimizer (or
        ``perftop.step()``) ends once it has begun (a teacher's forward, a target network)."""
        if tr.thread == 0 or (tr.in_gap and not tr.save_alone) or tr.in_opt is not None:
            return False  # (after a checkpoint's saves, an evaluation joins its pass)
        return not (
            tr.running
            and tr.mode >= OPTIMIZER
            and (tr.has_bwd or tr.has_fetch or tr.mark is None)
            and tr.active()
        )

    def timed_wait(self, tr: Any, t: float) -> None:
        wait = max(0.0, t - self.t0 - (_cpu() - self.c0))
        if tr.in_opt is not None:
            # A closure's forward, inside ``opt.step(closure)`` (LBFGS): the time since
            # the optimizer step began is that step's, so the wait is at most what came
            # before it (none when armed inside it, after a closure's backward).
            wait = min(wait, max(0.0, tr.opt_t0 - self.t0))
        tr.first_forward(wait)
        self.recent[self.recent_i] = wait
        self.recent_i = (self.recent_i + 1) % RECENT
        # Said once a step's forward came with no fetch before it: a step after one that
        # made none (a prefetching wrapper's epoch end) that fetches is the loader's.
        if not self.noted and tr.fwd_wait >= 0.0 and not (tr.has_fetch or tr.pend):
            self.noted = True
            self.state.sender.note("info", DATA_WAIT_NOTE)

    def compile_started(self, args: Any) -> None:
        """Dynamo starts compiling a frame, before it traces anything."""
        if self.handle is not None or self.in_wrapper == 0:
            self.off = True
            self.disarm()

    def stop(self) -> None:
        self.off = True
        self.disarm()

    def wrap_compile(self, orig: Any, module_type: type) -> Any:
        """``torch.compile`` of anything but a module (a function, a method, a decorator
        to come), or ``Module.compile()`` (``module_type`` None): dynamo will trace module
        calls; the hook is off from now on, before any compile."""
        ff = self

        @functools.wraps(orig)
        def compile(*args: Any, **kwargs: Any) -> Any:
            model = args[0] if args else kwargs.get("model")
            if not isinstance(model, module_type):
                ff.stop()
            return orig(*args, **kwargs)

        return compile

    def wrap_optimized(self, orig: Any) -> Any:
        ff = self

        @functools.wraps(orig)
        def __call__(mod: Any, *args: Any, **kwargs: Any) -> Any:
            if ff.handle is not None:
                try:
                    ff.fire()
                    ff.disarm()  # another thread's call: the wrapper must not see ours
                except Exception:
                    ff.state.internal_error("forward pre-hook")
            ff.in_wrapper += 1
            try:
                return orig(mod, *args, **kwargs)
            finally:
                ff.in_wrapper -= 1

        return __call__


def install(state: HookState) -> None:
    """Arms the tracker's feeder timing once torch is patched; dynamo hooked when imported."""
    import torch
    from torch.nn.modules.module import (
        register_module_forward_hook,
        register_module_forward_pre_hook,
    )

    ff = FirstForward(state, register_module_forward_pre_hook)
    tr = state.tracker
    ff.meter = PassMeter(
        register_module_forward_hook,
        lambda: tr.thread,
        state.internal_error,
    )
    tr.on_arm = ff.arm
    orig = torch.compile
    torch.compile = ff.wrap_compile(orig, torch.nn.Module)
    state.undo.append(lambda: setattr(torch, "compile", orig))
    module_compile = torch.nn.Module.compile
    torch.nn.Module.compile = ff.wrap_compile(module_compile, type(None))  # type: ignore[method-assign]
    state.undo.append(lambda: setattr(torch.nn.Module, "compile", module_compile))
    state.undo.append(ff.disarm)
    state.undo.append(ff.meter.stop)
    after_import("torch._dynamo", lambda _: _dynamo(state, ff))


def _dynamo(state: HookState, ff: FirstForward) -> None:
    try:
        import torch._dynamo.callback as cb
        import torch._dynamo.eval_frame as ef

        cb.callback_handler.register_start_callback(ff.compile_started)
        cls = ef.OptimizedModule
        orig = cls.__call__
        cls.__call__ = ff.wrap_optimized(orig)  # type: ignore[method-assign]
        state.undo.append(lambda: setattr(cls, "__call__", orig))
        state.undo.append(lambda: cb.callback_handler.remove_start_callback(ff.compile_started))
    except Exception:
        ff.off = True  # no way to tell where dynamo traces: never arm
        ff.disarm()
        state.internal_error("dynamo callbacks")
