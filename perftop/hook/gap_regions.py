"""``no_grad`` regions between steps: where a region entered with grad on opens an
interval (an evaluation, a sampling pass, a rollout) and where it ends (the list of what
opens one: :mod:`perftop.hook.gaps`).

Regions are keyed by their call site (the first line outside torch and perftop: the
``with``, or the call of a decorated function). A site also entered in the step before
is that loop's own per-step work (a manual SGD update, a target network, a teacher's
forward, an EMA) and stays in the step; so is a site first met inside the first step.
A forward with grad off inside an open pass counts as its site met in that stretch
(:func:`perftop.hook.gap_forward.met_in_pass`: TD3's target network, which a rollout's pass reaches).
A site met again in the same stretch between steps as its evaluation is one too
(``evaluate()`` called once per validation set). A site whose pass was a rollout
(pass_meter.py: an environment's steps between its forward calls) is a pass each time,
even after every step (DQN's few env steps between updates). In a closure optimizer's loop
(LBFGS) training is all inside ``opt.step(closure)``: any region between its steps is a
pass. A region entered in torch.nn or torch.optim code (a module's
``.to()``/``.cpu()``, weight init, gradient clipping) is torch's housekeeping, not a pass.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from perftop.hook.gap_bounds import EVAL, _backward_bound, end, enter
from perftop.hook.gap_site import _MAX_SITES, _site
from perftop.hook.pass_meter import ROLLOUT

if TYPE_CHECKING:  # the tracker whose rare paths these are (no import at run time)
    from perftop.hook.shape import Tracker


def region_enter(tr: Tracker, ctx: Any, t: float, site: Any = None, chained: bool = False) -> None:
    """A ``no_grad`` region entered with grad on at ``t`` (module docstring); ``site``:
    where, when known already (a rollout in eval mode opens later: pass_mode.py).
    ``chained``: where a pass ended (a rollout right after an evaluation). A rollout's site
    between iterations is a pass, however much of the step another optimizer's work holds:
    an actor-critic's rollout after its second optimizer's step, every iteration, was the
    step's own work from its second on (met in the step before)."""
    if (
        tr.thread == 0
        or (tr.in_gap and not tr.save_alone)
        or tr.in_opt is not None
        or (tr.pend and not tr.in_gap)
    ):
        return  # before training (a model's init), inside an optimizer step (LBFGS's)
    # (a batch pending in a checkpoint's gap: an evaluation's after the saves, whose forward
    # names the pass; outside a gap, the batch waits for what follows: gap_forward.may_pend)
    if site is None:
        site = _site()
    if site is None:
        return  # torch's housekeeping
    index, sites = tr.index, tr.ng_sites
    last = sites.get(site)
    inside = tr.running and tr.active()
    kind = EVAL  # what the pass is said to be while it runs (its end says what it was)
    if tr.closure_s > 0.0 and not inside:
        per_step = False  # between a closure optimizer's steps: no training there
    elif (not inside or chained or after_other_optimizer(tr)) and site in getattr(
        ctx, "rollout_sites", ()
    ):
        per_step, kind = False, ROLLOUT  # a rollout's site (pass_meter): an environment's
    elif last is None:
        per_step = inside and index == 0  # first met in the first step: its own work
    elif last[2] and last[1] == index and (not inside or _backward_bound(tr)):
        # an evaluation's site again, in the same stretch between steps (where backward()
        # ends steps, after the step's backward: its step goes on over its passes)
        per_step = False
    else:
        per_step = last[0] >= index - 1
    if not per_step:
        seen = True
        if inside and tr.has_fetch and not (tr.has_bwd or tr.bwd or tr.opt or tr.phases):
            # The step has made its batch and nothing else (a loop without an optimizer:
            # its step began at that fetch): an evaluation's first batch over the training
            # loader, the pass's (from the step's start), not the step's.
            tr.data, tr.has_fetch, seen = 0.0, False, False
        enter(tr, t, True, seen, kind)  # (a lazy source's step closes here: the index moves on)
        tr.region = ctx
    if len(sites) < _MAX_SITES:
        sites[site] = (index, tr.index, not per_step)


def resumed(tr: Tracker, t: float) -> None:
    """An optimizer step begins at ``t`` inside a pass that a forward with grad off opened
    (``opt.step(closure)``: the step's forwards come inside it, after its pre-hook): the
    pass's opener ends it where the step's wait for its batch began, as at a forward with
    grad on (first_forward.py), not at the step's start."""
    resume = getattr(tr.region, "resumed", None)
    if resume is not None:
        resume(t)


def region_exit(tr: Tracker, t: float) -> None:
    """The region that opened the interval exited at ``t``: the next step starts there.
    Its module calls took the one-shot first-forward timer (first_forward.py) of a step
    that times it: armed again, so the step's own first forward after the pass is timed
    (the pass cut out of the wait as it is out of the step)."""
    if tr.in_gap:
        end(tr, t)
        if (
            tr.timing
            and not tr.has_fetch
            and (not tr.has_bwd or _backward_bound(tr))
            and tr.on_arm is not None
        ):
            tr.on_arm()
    tr.region = None


def after_other_optimizer(tr: Tracker) -> bool:
    """Nothing happened since another optimizer's step (its end, the mark's t1, is the
    last thing training did): an iteration of several optimizers may have ended there."""
    mark = tr.mark
    return mark is not None and mark[1] == tr.last_end
