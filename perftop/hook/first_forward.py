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
while the pass runs, so the wait booked there is at most the median of the last
:data:`RECENT` waits before a step's forward (their longest would let one wait that a
busy host stretched move the pass's own time off the CPU to the step), and the rest
stays in the pass. A
closure's forward inside ``opt.step(closure)`` (LBFGS) waits only for what came before the
optimizer step: the wait is taken where the step begins (its pre-hook), the time inside it
is the optimizer phase's. The job's
own hooks run as before (ours is added after its global ones, and never changes arguments
or outputs).

Never where dynamo could trace it, nor where torch.compile(model)'s wrapper would warn
(compile_watch.py; nothing of torch's is replaced): a model compiled in place
(``Module.compile()``) or a compiled function runs module hooks inside the compiled
region, where an armed hook would be traced and guarded on, so the hook is off for good
once dynamo starts compiling a frame (its start callback, before it traces anything). A
``torch.compile(model)`` wrapper warns at each call while any global forward hook is
registered (``OptimizedModule.__call__``: "global hooks on modules"), which a plain run
does not print: the hook is off for good once such a wrapper is made (at
``torch.compile(model)``, before its first call), and the job's data wait behind a
feeder and its passes opened by a forward with grad off are not seen (a note says so;
DataLoader fetches, ``torch.save`` and the steps are timed as before).
"""

from __future__ import annotations

import threading
import time
from typing import Any

from perftop.hook import gaps
from perftop.hook.compile_watch import CompileWatch
from perftop.hook.pass_meter import ROLLOUT, PassMeter
from perftop.hook.pass_narrow import Narrow
from perftop.hook.state import HookState
from perftop.hook.steps import OPTIMIZER
from perftop.wire import DATA_WAIT_NOTE

MAX_STEP_SITES = 64  # call sites of a step's own forwards with grad off, kept
# The note said once the hook is off for good, after why (COMPILED_MODEL or DYNAMO).
OFF_NOTE = (
    "perftop registers no global module hook from now on, so data wait behind a feeder "
    "(before a step's first forward) and passes begun by a forward with grad off are no "
    "longer seen in this process"
)
COMPILED_MODEL = "torch.compile(model) is in use (its wrapper warns about global module hooks)"
DYNAMO = "dynamo compiles (it would trace a global module hook)"
RECENT = 8  # a feeder's wait after a pass: at most the median of this many steps' waits
# The CPU clock is a system call: ~0.6 µs in a loop of its own, but ~4 µs added to a tight
# training step on a VM (its two reads a step were a quarter of what the hook cost a 120 µs
# step). Once FAST_AFTER steps in a row waited less than WAIT_SEEN before their forward,
# it is no longer read: the loop's own work there (zero_grad(), its lines) took at most
# ``cpu_hi`` of CPU, so a step whose time before its forward stays within ``cpu_hi`` +
# WAIT_SEEN is booked no wait (at most WAIT_SEEN left out), and a longer one is booked its
# time beyond ``cpu_hi`` (a feeder's empty queue; a garbage collection there counts once as
# waiting) and the clock is read again from the next step on.
WAIT_SEEN, FAST_AFTER = 10e-6, 16

_perf = time.perf_counter
_cpu = time.thread_time  # this thread's CPU time: a clock read, the GIL kept


KEY = -0x7065_7266  # the hook's key in torch's table of global forward pre-hooks (torch's
# own keys, its RemovableHandle ids, count up from 0)


class PreHookSlot:
    """The one-shot pre-hook's place in torch's table of global forward pre-hooks
    (``_global_forward_pre_hooks``, the dict ``register_module_forward_pre_hook`` fills and
    ``Module._call_impl`` reads, looked up at each use as torch's call does): set and
    popped under one fixed key, at each step's end. Timed inside a tight loop (313 µs
    steps), torch's call and its handle's ``remove()`` cost ~8 µs a step more than this (a
    new handle and a new key each step); the table holds the same hook either way, and
    nothing of torch's is replaced. Where the table is no dict (another torch), torch's
    call."""

    def __init__(self, module: Any, register: Any) -> None:
        self.module = module  # torch.nn.modules.module
        self.register = register  # torch's register_module_forward_pre_hook
        self.table: dict[Any, Any] | None = None  # where the hook is, while it is
        self.handle: Any = None
        self.held = False  # the hook is in torch's table (put, not yet taken)

    def put(self, hook: Any) -> None:
        table = self.table_of()
        if isinstance(table, dict):
            table[KEY] = hook
            self.table = table
        else:
            self.handle = self.register(hook)
        self.held = True

    def table_of(self) -> Any:
        """torch's table where the hook goes (None: not a dict, torch's call used)."""
        return getattr(self.module, "_global_forward_pre_hooks", None)

    def take(self) -> None:
        self.held = False
        table, self.table = self.table, None
        if table is not None:
            table.pop(KEY, None)
        h, self.handle = self.handle, None
        if h is not None:
            h.remove()


class FirstForward:
    def __init__(self, state: HookState, slot: PreHookSlot, watch: CompileWatch) -> None:
        self.state = state
        self.watch = watch
        self.tracker = state.tracker
        self.slot = slot  # holds the pre-hook while armed
        self.off = False  # dynamo compiles module calls: never armed again
        self.noted = False
        # The step whose first forward came with no fetch before it: the note is said where
        # it ends with none after it either (a prefetching wrapper's epoch end, in a loop of
        # two optimizers, fetches after the first one's step closed: its next forward
        # comes first)
        self.note_due = -1
        self.t0 = self.c0 = 0.0  # wall and the training thread's CPU time when armed
        self.timed = False  # the step's wait behind a feeder is timed (else grad mode only)
        # The open pass began right after another optimizer's step, inside a step that has
        # done its own work (each optimizer after its own backward): the wait before the
        # forward that ends it is the next iteration's, booked to this step (resumed).
        self.late = False
        self.fast = False  # no step waits: the CPU clock is not read (WAIT_SEEN)
        self.short = 0  # steps in a row that waited less than WAIT_SEEN, timed
        self.cpu_hi = 0.0  # the most CPU time their loop took before a forward
        self.recent = [0.0] * RECENT  # the last waits before a step's forward (a ring)
        self.recent_i = self.recent_n = 0  # where the next goes; how many there are
        self.meter: Any = None  # pass_meter.PassMeter: what a pass this hook opened held
        self.step_sites: set[Any] = set()  # sites of forwards with grad off that were a
        # step's own work after its batch (a teacher's): never watched again
        self.narrow: Narrow | None = None  # a pass's top-level calls, narrowed (install)

    def arm(self) -> None:
        """Starts the wait (again, where armed already: a new step's) on the training
        thread, where the tracker calls it."""
        tr = self.tracker
        if self.note_due >= 0 and tr.index > self.note_due:
            self.data_note(tr)
        if self.off:
            return
        if threading.get_ident() != tr.thread:
            self.disarm()  # another thread's CPU clock: this step's wait unseen
            return
        self.watch.ensure()  # a compile is seen as it starts (after a torch._dynamo.reset())
        self.timed = tr.timing and not tr.has_fetch
        self.late = False
        # The CPU clock is a system call: read only where the wait is timed, and not while
        # no step waits (-1: not read; WAIT_SEEN).
        self.t0, self.c0 = _perf(), (_cpu() if self.timed and not self.fast else -1.0)
        if not self.slot.held:
            try:
                self.slot.put(self.hook)
            except Exception:
                self.state.internal_error("forward pre-hook")
                return
        if self.timed:  # timed from here: a step with no forward after this waited for none
            tr.first_forward(0.0)

    def watching(self) -> bool:
        """Armed and not yet fired: no module call since the step's end (gaps.read_ahead)."""
        return self.slot.held and not self.off

    def disarm(self) -> None:
        """Off until armed again; a pass's forward hook and profile function with it (before
        a compile: dynamo must trace no hook of ours)."""
        if self.narrow is not None:
            self.narrow.cancel()
        if self.slot.held:
            self.slot.take()
        if self.meter is not None and self.meter.handle is not None:
            self.meter.stop()

    def hook(self, module: Any, args: Any) -> None:
        try:
            tr, meter = self.tracker, self.meter
            if (
                meter is not None
                and meter.depth > 0
                and tr.region is self
                and threading.get_ident() == meter.tid
                and not tr.grad()
            ):  # a module inside one of the pass's forward calls: only counted
                meter.depth += 1
                return
            self.fire()
            if (
                meter is not None
                and meter.depth == 1
                and tr.region is self
                and self.narrow is not None
                and self.narrow.module is None
                and meter.handle is not None
            ):  # a top-level call of the pass began: its modules on torch's plain path
                self.narrow.enter(module)
        except Exception:
            self.state.internal_error("forward pre-hook")

    def lift(self) -> None:
        """Both of the pass's global hooks out while a top-level call runs narrowed."""
        self.slot.take()
        if self.meter is not None:
            self.meter.lift()

    def relay(self) -> None:
        """... and back where it returns, while the pass is open."""
        if self.tracker.region is self and not self.slot.held:
            self.slot.put(self.hook)
        if self.meter is not None:
            self.meter.relay()

    def fire(self) -> None:
        tr = self.tracker
        if threading.get_ident() != tr.thread:
            return  # another thread's module call (a feeder's): not the training loop's
        t = _perf()
        if tr.region is self:  # inside the pass this hook began: until grad is on again
            if not tr.grad():
                if tr.pend:  # a batch, then this forward: the pass's batch
                    gaps.pending_was_eval(tr)
                meter = self.meter
                if meter is None or not meter.measured:  # else its forward hook marks
                    self.t0, self.c0 = t, _cpu()  # the pass's last module call so far
                if meter is not None:
                    meter.pre(t)
                gaps.met_in_pass(tr)
                if t >= tr.flush_at and tr.on_flush is not None:
                    tr.on_flush()  # a send due (solo): the pass's calls send, as step ends do
                return
            self.resumed(t)
            return
        cand = tr.cand
        if cand is not None and cand[0] is self:  # a batch pends, and this hook's forward
            if not tr.grad():
                if self.meter is not None:
                    self.meter.pre(t)
                return  # the same forward's modules, or the next forward with grad off
            # A forward with grad on: the batch was the step's, the forward its own work
            # (a teacher's; ``dropped`` remembers its call site).
            gaps.training(tr, t)
            self.disarm()
            return
        self.watch.ensure()  # as in arm: a torch._dynamo.reset() since the step began
        if self.timed:
            self.timed = False
            self.timed_wait(tr, t)
        if tr.grad():
            pass
        elif self.may_pend(tr, t):
            return  # the batch before it pends: watching what comes next
        elif self.may_begin(tr):
            self.late = _after_other_optimizer(tr) and tr.active()
            tr.no_grad(True, self, t)
            if tr.region is self:
                self.t0, self.c0 = t, _cpu()
                if self.meter is not None:
                    self.meter.start(t, *gaps.site())
                return  # a pass began: watching for its end
        self.disarm()

    def resumed(self, t: float) -> None:
        """Training resumed at ``t`` after the pass this hook opened: a forward with grad
        on, or an optimizer step whose closure makes the step's forwards (LBFGS: the
        optimizer's pre-hook comes first, gaps.resumed). The pass ends where the step's
        wait for its batch began."""
        tr = self.tracker
        if tr.region is not self or threading.get_ident() != tr.thread:
            return
        self.last_out()
        self.disarm()
        if tr.pend:  # a batch, then this forward with grad on: the pass ended at its fetch
            gaps.training(tr, t)
            return
        # The time off the CPU since the pass's last module call (a feeder's next
        # batch) is the step's wait before its forward, not the pass's.
        wait = min(max(0.0, t - self.t0 - (_cpu() - self.c0)), self.typical())
        wait = self.after_sync(t, wait)
        if tr.save_s > 0.0 and tr.save_end > self.t0:
            # a save after the pass's last module call (its file's writing is time off
            # the CPU too): the pass holds it, the wait comes after it returned
            wait = min(wait, max(0.0, t - tr.save_end))
        tr.no_grad(False, self, t - wait)  # the pass ends (and arms again if timing)
        if self.timed or (self.late and tr.timing and not tr.has_fetch):
            self.timed = self.late = False
            tr.first_forward(wait)
            self.disarm()

    def after_sync(self, t: float, wait: float) -> float:
        """The wait, where a sync was seen in the pass after its last module call (a
        rollout's return read): the thread's time off the CPU before that sync (less its
        own blocking) and after it tell which side the feeder's wait lay on. More after it:
        the sync is the pass's, which ends after it (a preemption before the sync would
        otherwise move the pass's end before it, and the sync into the next step). More
        before it: the sync came after the batch (a step's own check of its data)."""
        gs = self.tail()
        if gs is None:
            return wait
        ts, cs, blocked = gs
        before = (ts - self.t0) - (cs - self.c0) - blocked
        after = (t - ts) - (_cpu() - cs)
        return min(wait, max(0.0, t - ts)) if after >= before else wait

    def tail(self) -> tuple[float, float, float] | None:
        """The last sync seen in this pass after its last module call, if any (also read by
        gaps.at_exit: a final pass holds it)."""
        gs = self.state.gap_sync
        return gs if gs is not None and gs[0] > self.t0 else None

    def last_out(self) -> None:
        """Where the pass's last forward returned, as its forward hook saw it (one CPU
        clock read a forward, not one a module call): the time off the CPU since then is
        the pass's own tail or a feeder's next batch."""
        meter = self.meter
        if meter is not None and meter.measured and meter.t_out > self.t0:
            self.t0, self.c0 = meter.t_out, meter.c_out

    def closure_began(self) -> None:
        """``opt.step(closure)`` began (its pre-hook): the closures' forwards come inside
        it, so the step's wait is the time off the CPU before it, taken here. (Taken at the
        first closure's forward and capped by the wall time before the step, a closure's
        own time off the CPU, a sleep, filled that cap wherever the loop ran on the CPU
        between steps: a log line, a garbage collection, a core it waited for.)"""
        try:
            tr = self.tracker
            if self.timed and threading.get_ident() == tr.thread:
                self.timed = False
                self.timed_wait(tr, _perf())
        except Exception:
            self.state.internal_error("forward pre-hook")

    def typical(self) -> float:
        """What a feeder's next batch takes: the median of the last :data:`RECENT` waits
        before a step's forward (0 before any). Not their longest: on a busy host one of
        them stretched by a preemption (or a wait for the GIL) lets the time off the CPU at
        a pass's end, its own, go to the wait, and the pass reads that much shorter."""
        n = min(self.recent_n, RECENT)
        return sorted(self.recent[:n])[n // 2] if n else 0.0

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

    def may_pend(self, tr: Any, t: float) -> bool:
        """A forward with grad off after a batch (gaps.may_pend): watched until what follows
        says whose the batch was; not at a call site that was a step's own work before."""
        if self.meter is None or not gaps.may_pend(tr):
            return False
        site, name = gaps.site()
        if site in self.step_sites:
            return False
        gaps.pend_batch(tr, self)
        self.meter.start(t, site, name)
        return True

    def env_seen(self) -> None:
        """The pass this hook holds steps an environment: said to be a rollout from now on
        (a ``BetweenOpen`` again, same start), not an evaluation, while it runs."""
        tr = self.tracker
        if tr.in_gap and tr.region is self and tr.on_open is not None:
            tr.on_open(ROLLOUT, tr.gap_t0)

    def dropped(self) -> None:
        """The forward this hook watched was the step's own work (gaps.training: a forward
        with grad on, a backward or an optimizer step came next): its call site is one
        from now on, never watched again (a frozen encoder's forward in every step)."""
        if self.meter is not None:
            self.meter.stop()
            if len(self.step_sites) < MAX_STEP_SITES:
                self.step_sites.add(self.meter.site)

    @staticmethod
    def may_begin(tr: Any) -> bool:
        """Whether a forward with grad off can begin a pass here: not before training, not
        inside one or inside an optimizer's step; not inside a step that an optimizer (or
        ``perftop.step()``) ends once it has begun (a teacher's forward, a target network),
        unless the last thing training did was another optimizer's step: an iteration of
        several optimizers, each after its own backward (SAC's three, a GAN's two), ended
        there, whichever of them closes steps (the first one seen), and what comes before
        the next iteration's work is between iterations (SAC's rollouts)."""
        if tr.thread == 0 or (tr.in_gap and not tr.save_alone) or tr.in_opt is not None:
            return False  # (after a checkpoint's saves, an evaluation joins its pass)
        if _after_other_optimizer(tr):
            return True
        return not (
            tr.running
            and tr.mode >= OPTIMIZER
            and (tr.has_bwd or tr.has_fetch or tr.mark is None)
            and tr.active()
        )

    def timed_wait(self, tr: Any, t: float) -> None:
        gap = t - self.t0
        if tr.in_gap and tr.grad() and gaps.saves_done(tr, t):
            # The step's forward after a checkpoint's saves: the checkpoint ended where its
            # last save returned (its file's writing is time off the CPU too, and its own);
            # the wait after that is this step's. Not a step like the others: the rule of
            # steps that wait for nothing (WAIT_SEEN) learns nothing from it.
            after = max(0.0, t - tr.save_end)
            if self.c0 < 0.0:
                wait = max(0.0, after - self.cpu_hi)
            else:
                wait = min(after, max(0.0, gap - (_cpu() - self.c0)))
        elif self.c0 < 0.0:  # the clock was not read: no step has been waiting
            wait = max(0.0, gap - self.cpu_hi)
            if wait < WAIT_SEEN:
                wait = 0.0
            else:  # this one did: the clock is read again from the next step
                self.fast, self.short = False, 0
        else:
            wait = max(0.0, gap - (_cpu() - self.c0))
            if wait < WAIT_SEEN:
                self.cpu_hi = max(self.cpu_hi, gap - wait) if self.short else gap - wait
                self.short += 1
                self.fast = self.short >= FAST_AFTER
            else:
                self.short = 0
        if tr.in_opt is not None:
            # Inside ``opt.step(closure)`` (LBFGS): the time since the optimizer step began
            # is that step's, so the wait is at most what came before it (taken where it
            # began, closure_began; none when armed inside it, after a closure's backward).
            wait = min(wait, max(0.0, tr.opt_t0 - self.t0))
        tr.first_forward(wait)
        if tr.grad():  # a step's forward (a pass's first one waits for no batch)
            self.recent[self.recent_i] = wait
            self.recent_i = (self.recent_i + 1) % RECENT
            self.recent_n += 1
        # Said once a step booked this wait: its forward came with no fetch before it,
        # and it ended with none after it (data_note). A step after one that made none (a
        # prefetching wrapper's epoch end) that fetches, before or after a forward, is the
        # loader's.
        if (
            not self.noted
            and self.note_due < 0
            and tr.fwd_wait >= 0.0
            and not (tr.has_fetch or tr.pend)
        ):
            self.note_due = tr.index  # said once that step ends with no fetch (arm)

    def data_note(self, tr: Any) -> None:
        """Past the step that timed a wait before its forward: the note, unless that step
        fetched after all. Where a step end arms (an optimizer's loop), the closing
        step's fetch is still known here (its index just moved on); elsewhere it is not,
        and the note is said."""
        due, self.note_due = self.note_due, -1
        if tr.mode >= OPTIMIZER and tr.index == due + 1 and tr.has_fetch:
            return
        if not self.noted:
            self.noted = True
            self.state.sender.note("info", DATA_WAIT_NOTE)

    def compile_started(self) -> None:
        """dynamo starts compiling a frame, before it traces anything: off for good."""
        self.stop(DYNAMO)

    def wrapper_made(self) -> None:
        """A torch.compile(model) wrapper exists: its calls warn while a global forward
        hook is registered, so off for good."""
        self.stop(COMPILED_MODEL)

    def stop(self, why: str) -> None:
        """Off for good, said once: a step with no fetch on the training thread has its
        data wait absent from now on (not seen, so not 0)."""
        if not self.off:
            self.off = True
            self.noted = True  # the feeder's note would contradict it
            self.tracker.blind = True
            self.state.sender.note("info", f"{why}: {OFF_NOTE}")
        self.disarm()


def _after_other_optimizer(tr: Any) -> bool:
    """Nothing happened since another optimizer's step (its end, the mark's t1, is the
    last thing training did): an iteration of several optimizers may have ended there."""
    mark = tr.mark
    return mark is not None and mark[1] == tr.last_end


def install(state: HookState, watch: CompileWatch) -> None:
    """Arms the tracker's feeder timing once torch is patched; off once compiles are seen."""
    from torch.nn.modules import module
    from torch.nn.modules.module import (
        register_module_forward_hook,
        register_module_forward_pre_hook,
    )

    ff = FirstForward(state, PreHookSlot(module, register_module_forward_pre_hook), watch)
    tr = state.tracker
    ff.meter = PassMeter(
        register_module_forward_hook,
        lambda: tr.thread,
        state.internal_error,
    )
    tr.on_arm = ff.arm
    tr.watching = ff.watching
    tr.on_closure = ff.closure_began
    ff.meter.on_env = ff.env_seen
    table = getattr(module, "_global_forward_hooks", None)
    if isinstance(table, dict) and isinstance(ff.slot.table_of(), dict):
        ff.meter.table = table
        ff.narrow = Narrow(ff.lift, ff.relay, ff.meter.post, lambda: tr.thread,
                           state.internal_error)  # fmt: skip
    state.undo.append(ff.disarm)
    state.undo.append(ff.meter.stop)
    watch.listen(ff.wrapper_made, ff.compile_started)
