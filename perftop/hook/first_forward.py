"""Data wait behind a feeder: the training thread's wait before each step's forwards.

A loop fed by a queue that another thread fills, a generator or a prefetcher class makes
no DataLoader fetch on the training thread, so the fetch cannot be timed. For such steps
only (steps whose last step made no fetch), the tracker arms a one-shot global forward
pre-hook at the step's start and after each backward (accumulation's later micro-batches;
where ``backward()`` ends steps, a loop without an optimizer, the next step's first): the
next module call on the training thread records how long the thread was off the CPU since
then (wall time less its CPU time) and removes the hook at once, so about one module call
per step takes ``Module._call_impl``'s slow path. Off the CPU is waiting: on a queue, a
feeder's lock or the GIL, a read, a sleep; where the thread never blocked in that time (no
voluntary context switch), it waited for a core only, on a busy host, and the step waited
for no data. The loop's own work before the forward (``zero_grad()``, a log line)
is not waiting, nor is a generator's own CPU work on the training thread (it stays in the
step's time). Both clocks are read without dropping the GIL (a read of /proc/thread-self/schedstat
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
from typing import Any

from perftop.hook import gap_forward, gap_regions, gap_site, gaps
from perftop.hook.compile_watch import CompileWatch
from perftop.hook.feeder_wait import RECENT, _cpu, _perf
from perftop.hook.pass_meter import cpu_wall
from perftop.hook.pass_mode import PassMode
from perftop.hook.pass_narrow import Narrow
from perftop.hook.prehook_slot import PreHookSlot
from perftop.hook.state import HookState

# The note said once the hook is off for good, after why (COMPILED_MODEL or DYNAMO).
OFF_NOTE = (
    "perftop registers no global module hook from now on, so data wait behind a feeder "
    "(before a step's first forward) and passes begun by a forward with grad off are no "
    "longer seen in this process"
)
COMPILED_MODEL = "torch.compile(model) is in use (its wrapper warns about global module hooks)"
DYNAMO = "dynamo compiles (it would trace a global module hook)"


class FirstForward(PassMode):
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
        self.fired = 0.0  # when it last fired on the training thread (watching)
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
        self.recent_at = -1  # the step whose wait the last entry holds
        self.blocks, self.unread = -1, 0  # voluntary switches when last read (feeder_wait)
        self.meter: Any = None  # pass_meter.PassMeter: what a pass this hook opened held
        self.step_sites: set[Any] = set()  # sites of forwards with grad off that were a
        # step's own work after its batch (a teacher's): never watched again
        self.narrow: Narrow | None = None  # a pass's top-level calls, narrowed (torch_patch)
        self.ev: tuple[float, float, Any] | None = None  # an eval-mode candidate (pass_mode)
        self.ev_at = (0, False, False)
        self.by_mode = False  # the open pass was one
        self.chained = False  # the candidate began where a pass ended

    def arm(self) -> None:
        """Starts the wait (again, where armed already: a new step's) on the training
        thread, where the tracker calls it."""
        tr = self.tracker
        if self.note_due >= 0 and tr.index > self.note_due:
            self.data_note(tr)
        if self.ev is not None:  # a step ended while an eval-mode candidate was watched
            self.mode_drop()
        if self.off:
            return
        if threading.get_ident() != tr.thread:
            self.disarm()  # another thread's CPU clock: this step's wait unseen
            return
        self.watch.ensure()  # a compile is seen as it starts (after a torch._dynamo.reset())
        self.timed = tr.timing and not tr.has_fetch
        self.late = False
        self.start()
        if not self.slot.held:
            try:
                self.slot.put(self.hook)
            except Exception:
                self.state.internal_error("forward pre-hook")
                return
        if self.timed:  # timed from here: a step with no forward after this waited for none
            tr.first_forward(0.0)

    def watching(self, t: float) -> bool | None:
        """For gaps.read_ahead: False where it fired after ``t`` (a module call since, even
        one it stays armed after: an eval-mode candidate's), True armed and not yet fired
        (no module call since the step's end), else None."""
        if self.off:
            return None
        if self.fired > t:
            return False
        return True if self.slot.held else None

    def disarm(self) -> None:
        """Off until armed again; a pass's forward hook and profile function with it (before
        a compile: dynamo must trace no hook of ours)."""
        self.ev = None
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
            self.fire(module)
            if (
                meter is not None
                and meter.depth == 1
                and (tr.region is self or self.ev is not None)
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
        """... and back where it returns, while the pass (or a candidate) is open."""
        if (self.tracker.region is self or self.ev is not None) and not self.slot.held:
            self.slot.put(self.hook)
        if self.meter is not None:
            self.meter.relay()

    def fire(self, module: Any) -> None:
        tr = self.tracker
        if threading.get_ident() != tr.thread:
            return  # another thread's module call (a feeder's): not the training loop's
        t = self.fired = _perf()
        if self.ev is not None:  # an eval-mode candidate's (pass_mode.py)
            self.mode_call(module, t)
            return
        # the CPU clock with the wall clock, where a timed wait reads it: the hook's own
        # work below (cold after a sleep: tens of µs on a busy host) is no part of the wait
        c = _cpu() if self.timed and self.c0 >= 0.0 else -1.0
        if tr.region is self:  # inside the pass this hook began: until grad is on again
            off = not tr.grad()
            # A forward in eval mode with grad on after a batch of a loader that never fed
            # training (a validation with grad on, no no_grad, right after this pass): the
            # pass goes on, and that loader's next batch (an evaluation's) or training (a
            # backward: gaps.training) decides the batch
            undecided = (
                not off
                and tr.pend
                and tr.pend_loader not in tr.train_loaders
                and not getattr(module, "training", True)
            )
            if off or undecided or self.in_mode_pass(module):
                if tr.pend and not undecided:  # a batch, then this forward: the pass's batch
                    gaps.pending_was_eval(tr)
                meter = self.meter
                if meter is None or not meter.measured:  # else its forward hook marks
                    self.c0, self.t0 = cpu_wall()  # the pass's last module call so far
                if meter is not None:
                    meter.pre(t)
                if off:
                    gap_forward.met_in_pass(tr)
                if t >= tr.flush_at and tr.on_flush is not None:
                    tr.on_flush()  # a send due (solo): the pass's calls send, as step ends do
                return
            self.resumed(t)
            if tr.region is None:
                self.mode_begin(module, tr, t, True)  # an eval-mode rollout right after it
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
        if tr.region is None and tr.grad() and gap_forward.aside(module):
            # A weight's parametrization (weight_norm's) or a module of no parameters and no
            # submodules (a GP constraint's Softplus) called with grad on, as a log line
            # that reads a weight after the update does: no training forward. The hook
            # stays armed for what comes next (an evaluation under no_grad was missed).
            return
        self.watch.ensure()  # as in arm: a torch._dynamo.reset() since the step began
        if self.timed:
            self.timed = False
            self.timed_wait(tr, t, c)
        if tr.grad():
            if self.mode_begin(module, tr, t):
                return  # an eval-mode forward: a rollout's if an environment steps next
        elif self.may_pend(tr, t):
            return  # the batch before it pends: watching what comes next
        elif self.may_begin(tr):
            self.late = gap_regions.after_other_optimizer(tr) and tr.active()
            tr.no_grad(True, self, t)
            if tr.region is self:
                self.by_mode = False
                self.c0, self.t0 = cpu_wall()
                if self.meter is not None:
                    self.meter.start(t, *gap_site.site())
                return  # a pass began: watching for its end
        elif tr.in_gap and tr.region is None and tr.gap_eval and tr.batch_site is None:
            # A pass its first batch opened (fetched with grad off: a validation loader
            # iterated under no_grad or inference_mode): this hook holds it from its first
            # module call on, as one a forward opens, so the forward with grad on after it
            # ends it where the step's wait for its batch began (resumed). Let go here, the
            # pass ran to the next backward, holding that wait (a feeder's next batch) and
            # the forward: the step before booked no wait.
            site, name = gap_site.site()
            tr.batch_site = name
            if self.meter is not None and threading.get_ident() == tr.thread:
                tr.region = self
                self.by_mode = False
                self.c0, self.t0 = cpu_wall()
                self.meter.start(t, site, name)
                self.meter.batch = True  # opened by a loader's batch: an evaluation
                return
        self.disarm()

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
