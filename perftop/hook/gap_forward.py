"""What the forward pre-hook (first_forward.py) tells the intervals between steps: a
forward with grad off after a batch may hold it pending (an evaluation's, or the step's),
one inside an open pass meets its call site, and a forward with grad on ends a checkpoint of
saves alone. Apart from gaps.py: only that hook calls these, never the tracker.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from perftop.hook.gap_bounds import OPTIMIZER, end
from perftop.hook.gap_site import _MAX_SITES, _site

if TYPE_CHECKING:  # the tracker whose rare paths these are (no import at run time)
    from perftop.hook.shape import Tracker


def saves_done(tr: Tracker, t: float) -> bool:
    """A forward with grad on at ``t`` while a checkpoint of saves alone is open (a loop
    fed without a DataLoader, whose next batch ends no pass): the checkpoint is over, where
    its last save returned (:func:`end`), and the forward is the next step's; True where
    it ended here. An evaluation after the saves (a forward with grad off) joins them."""
    if not (tr.save_alone and not tr.gap_eval):
        return False
    end(tr, t)
    return True


def may_pend(tr: Tracker) -> bool:
    """Whether a forward with grad off, the first module call since the step's end (that
    of first_forward's hook, armed there), may be an evaluation's after its batch: an
    unknown loader's batch pends, or the step has made a batch and nothing else. That
    is an evaluation's first batch over a training loader (ignite's
    ``evaluator.run(train_loader)``, its ``no_grad`` inside each iteration) or the step's
    own batch before a teacher's forward: :func:`pend_batch` says which, later."""
    if tr.in_gap or tr.in_opt is not None or tr.cand is not None or not tr.running:
        return False
    if tr.pend:
        return True
    if tr.mode < OPTIMIZER or not tr.has_fetch or tr.phases is not None:
        return False
    mark = tr.mark  # a second optimizer stepped after the step's end (a GAN's): its time
    if not tr.has_bwd and tr.bwd == 0.0 and tr.opt == (0.0 if mark is None else mark[4]):
        return True  # is this step's optimizer phase so far, and nothing else is
    return _batch_since_mark(tr)


def _batch_since_mark(tr: Tracker) -> bool:
    """An iteration of two losses, each with its backward and its optimizer's step, ended
    at the second optimizer's step (the mark; the first closes steps, so the second's
    forward and backward are in the step after), and the loop has made a batch since and
    nothing else: an evaluation over the training loader after it (each of its batches
    fetched with grad on) had its forwards read as the step's own work."""
    mark = tr.mark
    return (
        mark is not None
        and mark[2] == 0.0  # no batch before the mark in this step: only the one after
        and tr.data > 0.0
        and tr.bwd == mark[3]
        and tr.opt == mark[4]
        and tr.last_end > mark[1]
    )


def pend_batch(tr: Tracker, hook: Any) -> None:
    """After :func:`may_pend`: the batch pends (an unknown loader's pends already), with
    ``hook`` the forward's. Another batch before training makes it an evaluation's (its
    pass from the last step's end, ``hook`` holding it: its function, its time inside
    forward calls, its end at a forward with grad on); training makes it the step's."""
    if tr.pend:
        tr.cand = (hook, False)
        return
    tr.pend, tr.pend_got, tr.pend_loader = True, True, tr.train_last
    tr.pend_t0, tr.pend_t1 = tr.last_end - tr.data, tr.last_end  # (after a mark: its data 0)
    tr.cand = (hook, True)


def met_in_pass(tr: Tracker) -> None:
    """A forward with grad off inside an open pass: its site is met in this stretch (not
    as a pass's start), as if its region were entered here. A loop's own per-step work that
    a pass reaches (TD3's target network, computed after the rollout and before the next
    forward with grad on) is then seen in the step before the next time it comes, and stays
    in that step. A site already met in this stretch keeps what it was (the pass's own
    start: an evaluation's site again, in the same stretch, is still one)."""
    sites, index = tr.ng_sites, tr.index
    site = _site()
    if site is None:
        return
    last = sites.get(site)
    if (last is None and len(sites) < _MAX_SITES) or (last is not None and last[1] < index):
        sites[site] = (index, index, False)


def aside(module: Any) -> bool:
    """A module call that begins no training forward: torch's ``ParametrizationList``
    (a parametrized weight read), or a module with no parameters and no submodules."""
    if type(module).__name__ == "ParametrizationList":
        return True
    params = getattr(module, "_parameters", None)
    subs = getattr(module, "_modules", None)
    return params is not None and subs is not None and not params and not subs
