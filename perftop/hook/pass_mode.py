"""A rollout whose policy runs with grad on, its modules in eval mode: a pass once an
environment is stepped between its forward calls.

tianshou's collectors put the policy in eval mode around a collection (``train(False)``)
and call it with grad on: no forward with grad off opens a pass, so its rollouts and test
collections were counted inside the next step (a step of 0.6 s against 8 ms). Eval mode
alone names nothing: a loop that trains with its modules in eval mode (a frozen
BatchNorm's fine-tuning) makes the same forward, then a backward. So the first module
call since a step's end made in eval mode with grad on, between steps (``may_begin``), in a
process that has imported an environment library, is only a candidate: the pass meter
watches the stretches after its forward calls for an environment's ``step``
(pass_meter.py), and the pass opens where that is seen, at the candidate's first module
call, as a ``rollout``. Training first (a forward in training mode with grad on, the step's
end) drops the candidate, counted as one look at its site (a site looked at
:data:`perftop.hook.pass_meter.LOOKS` times with no environment is not a candidate again).
A site whose pass was a rollout opens its pass at once, as one a forward with grad off opens.

A pass opened so goes on over forward calls in eval mode or with grad off, and ends at the
next forward in training mode with grad on (or at training: a backward, an optimizer step).
A loop whose update backpropagates through a rollout made in eval mode (REINFORCE's log
probabilities, with the policy in eval mode) has that rollout as a pass too: it stepped an
environment between forward calls with no training between them.
"""

from __future__ import annotations

from typing import Any

from perftop.hook import gap_regions, gap_site
from perftop.hook.pass_meter import cpu_wall
from perftop.hook.pass_names import env_types
from perftop.hook.pass_open import PassOpen


class PassMode(PassOpen):
    """The eval-mode candidate of :class:`perftop.hook.first_forward.FirstForward`;
    ``ev`` and ``by_mode`` are set in its ``__init__``."""

    ev: tuple[float, float, Any] | None  # the candidate's first module call: wall, CPU, site
    ev_at: tuple[int, bool, bool]  # the tracker's step, fetch and backward seen then
    by_mode: bool  # the open pass was a candidate: eval-mode forwards with grad on are its
    chained: bool  # the candidate began where a pass ended (mode_begin)

    def mode_begin(self, module: Any, tr: Any, t: float, chained: bool = False) -> bool:
        """The first module call since the step's end, grad on, at ``t``: True where it is
        a candidate (its module in eval mode, an environment library imported, between
        steps, at a site that was no step's own work and may still step an environment).
        ``chained``: the call that ended a pass (its next one may begin here, between
        iterations as it was, whatever training did before it)."""
        meter = self.meter
        if meter is None or getattr(module, "training", True) or not env_types():
            return False
        if not self.may_begin(tr, chained):
            return False
        site, name = gap_site.site()
        if site is None or site in self.step_sites:
            return False
        if meter.exhausted(site):
            return False  # looked at enough with no environment stepped: the step's own
        c, _ = cpu_wall()
        meter.start(t, site, name)  # (an environment library is imported: it looks)
        self.late = (chained or gap_regions.after_other_optimizer(tr)) and tr.active()
        self.chained = chained
        self.ev = (t, c, site)
        self.ev_at = (tr.index, tr.has_fetch, tr.has_bwd)
        if meter.env:  # a rollout's site: a pass each time, from here
            self.mode_open()
        return True

    def mode_call(self, module: Any, t: float) -> None:
        """A module call while the candidate is watched: another of its forward calls
        (eval mode, or grad off), or training's forward, which ends it."""
        if not self.tracker.grad() or not getattr(module, "training", True):
            self.meter.pre(t)
            return
        self.mode_drop()

    def mode_drop(self) -> None:
        """The candidate was the step's own work (training came, no environment stepped)."""
        if self.ev is not None:
            self.ev = None
            self.meter.dismiss()
        self.disarm()

    def mode_open(self) -> None:
        """The candidate stepped an environment: its pass opens where it began."""
        ev, self.ev = self.ev, None
        if ev is None:
            return
        t, c, site = ev
        tr = self.tracker
        if (tr.index, tr.has_fetch, tr.has_bwd) != self.ev_at:
            self.disarm()  # training went on since (a batch, a backward): the step's own
            return
        gap_regions.region_enter(tr, self, t, site, self.chained)
        if tr.region is not self:  # not a pass here (the tracker's own rules)
            self.disarm()
            return
        self.by_mode = True
        self.c0, self.t0 = c, t  # (a forward's return since is later: last_out takes it)

    def env_seen(self) -> None:
        """An environment stepped: a candidate's pass opens, then is said to be a rollout."""
        if self.ev is not None:
            self.mode_open()
        super().env_seen()

    def in_mode_pass(self, module: Any) -> bool:
        """A forward with grad on in eval mode goes on with a pass opened so."""
        return self.by_mode and not getattr(module, "training", True)
