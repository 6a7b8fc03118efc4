"""The pass that first_forward.py's hook opens at a forward with grad off: whether one may
begin there, or a batch pend on it; what it held (its verdict, its sites); where it ends when
training resumes, and how much of the time off the CPU before that is the next step's wait. A
base of :class:`perftop.hook.first_forward.FirstForward` apart from the arming and firing of
its one-shot hook: the pass's side of it, which a few calls per pass reach.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from perftop.hook import gap_bounds, gap_forward, gap_regions, gap_site, gaps
from perftop.hook.feeder_wait import FeederWait, _cpu
from perftop.hook.pass_meter import ROLLOUT, switches
from perftop.hook.steps import OPTIMIZER

MAX_STEP_SITES = 64  # call sites of a step's own forwards with grad off, kept


class PassOpen(FeederWait):
    """The pass the hook holds; its attributes are set in ``FirstForward.__init__``."""

    late: bool
    meter: Any
    step_sites: set[Any]
    disarm: Callable[[], None]  # FirstForward.disarm

    def resumed(self, t: float) -> None:
        """Training resumed at ``t`` after the pass this hook opened: a forward with grad
        on, or an optimizer step whose closure makes the step's forwards (LBFGS: the
        optimizer's pre-hook comes first, gap_regions.resumed). The pass ends where the step's
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
        # Where it never blocked since, off the CPU it only waited for a core (a busy
        # host's preemption), for no feeder's batch: the pass holds that time, and its
        # tail's syncs (a metric's .item() after its last forward) with it.
        blocked = not 0 <= self._switches_at_t0() == switches()
        wait = self.after_sync(t, wait) if blocked else 0.0
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
        own blocking) and after it tell which side the feeder's wait lay on. The sync is the
        pass's, which ends after it, where there was more off the CPU after it; or where
        the thread blocked after it and either for half a feeder's usual wait or more, or
        never between the last module call and it (off the CPU there it only waited for a
        core: a feeder's wait is a block, a preemption is not; on a busy host a preemption
        before the sync can outlast the feeder's wait, and the usual wait, stretched by
        preemptions too, twice a sleep's). Else the sync came after the batch (a step's own
        check of its data)."""
        gs = self.tail()
        if gs is None:
            return wait
        ts, cs, blocked, n = gs
        before = (ts - self.t0) - (cs - self.c0) - blocked
        after = (t - ts) - (_cpu() - cs)
        if after >= before or (
            0 <= n < switches() and (after >= self.typical() / 2 or self._switches_at_t0() == n)
        ):
            return min(wait, max(0.0, t - ts))
        return wait

    def _switches_at_t0(self) -> int:
        """The thread's voluntary switches where ``t0`` was read: the pass's last forward's
        return, as its forward hook saw it (:meth:`last_out`); -1 where not known."""
        meter = self.meter
        if meter is not None and meter.measured and meter.t_out == self.t0:
            return int(meter.n_out)
        return -1

    def tail(self) -> tuple[float, float, float, int] | None:
        """The last sync seen in this pass after its last module call, if any (also read by
        gap_bounds.at_exit: a final pass holds it)."""
        gs = self.state.gap_sync
        return gs if gs is not None and gs[0] > self.t0 else None

    def last_out(self) -> None:
        """Where the pass's last forward returned, as its forward hook saw it (one CPU
        clock read a forward, not one a module call): the time off the CPU since then is
        the pass's own tail or a feeder's next batch."""
        meter = self.meter
        if meter is not None and meter.measured and meter.t_out > self.t0:
            self.t0, self.c0 = meter.t_out, meter.c_out

    def verdict(self, length: float) -> tuple[str, str, float]:
        """The pass this hook opened ended (gap_bounds.end): its kind, site, forwards' time."""
        if self.meter is None:
            return gap_bounds.EVAL, "", -1.0
        return self.meter.verdict(length, gap_bounds.EVAL)

    @property
    def rollout_sites(self) -> Any:
        """Sites whose pass was a rollout: a pass each time (gap_regions.region_enter)."""
        return self.meter.rollout_sites if self.meter is not None else ()

    def batch_seen(self) -> None:
        """A DataLoader batch was fetched with grad off in the pass: an evaluation's."""
        if self.meter is not None:
            self.meter.batch = True

    def may_pend(self, tr: Any, t: float) -> bool:
        """A forward with grad off after a batch (gap_forward.may_pend): watched until what follows
        says whose the batch was; not at a call site that was a step's own work before,
        unless the batch is a loader's that never fed training (GRPO's generation, in each
        step and then in its evaluation: the evaluation's first forward is at the step's
        site, after the evaluation loader's batch)."""
        if self.meter is None or not gap_forward.may_pend(tr):
            return False
        site, name = gap_site.site()
        if site in self.step_sites and not (tr.pend and tr.pend_loader not in tr.train_loaders):
            return False
        gap_forward.pend_batch(tr, self)
        fetched = tr.pend_site if tr.pend else None  # (else the step's own batch)
        self.meter.start(t, site, gap_site.loop_name(name, fetched))
        maybe = getattr(self.state, "pass_maybe", None)
        if maybe is not None:
            maybe()  # the sync detector's watch of the pass this may be, from here
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
        refuted = getattr(self.state, "pass_refuted", None)
        if refuted is not None:
            refuted()

    @staticmethod
    def may_begin(tr: Any, chained: bool = False) -> bool:
        """Whether a forward with grad off can begin a pass here: not before training, not
        inside one or inside an optimizer's step; not inside a step that an optimizer (or
        ``perftop.step()``) ends once it has begun (a teacher's forward, a target network),
        unless the last thing training did was another optimizer's step: an iteration of
        several optimizers, each after its own backward (SAC's three, a GAN's two), ended
        there, whichever of them closes steps (the first one seen), and what comes before
        the next iteration's work is between iterations (SAC's rollouts); or where a pass
        ended at this forward (``chained``: a rollout right after an evaluation, whose
        batches moved the last activity on, between iterations as it was)."""
        if tr.thread == 0 or (tr.in_gap and not tr.save_alone) or tr.in_opt is not None:
            return False  # (after a checkpoint's saves, an evaluation joins its pass)
        if chained or gap_regions.after_other_optimizer(tr):
            return True
        return not (
            tr.running
            and tr.mode >= OPTIMIZER
            and (tr.has_bwd or tr.has_fetch or tr.mark is None)
            and tr.active()
        )
