"""Time outside training steps: an evaluation pass, a checkpoint. Cut out of the steps
around it and reported as its own intervals (``StepTracker.on_between``).

What opens an interval:

- a DataLoader batch fetched with grad disabled (``torch.no_grad``, ``inference_mode``);
- a batch from a loader that has never fed a training step, unless training (backward,
  an optimizer step) follows it before the next batch (then it is the next training
  loader, as in a second ``fit``);
- a ``torch.save`` call;
- a ``torch.no_grad()`` region (a ``with`` block, a decorated ``estimate_loss()`` or
  ``generate()``) entered with grad on where a step has not begun yet (after an optimizer
  step or ``perftop.step()``, before the next batch or backward), or inside a step that
  only a lazy source closes (after ``backward()`` in a loop without an optimizer) or that
  only a second optimizer's step began. Its ``__enter__`` and ``__exit__`` are the signal:
  nothing per module call. It closes when the region exits.
  Regions are keyed by their call site (the first line outside torch and perftop: the
  ``with``, or the call of a decorated function). A site also entered in the step before
  is that loop's own per-step work (a manual SGD update, a target network, a teacher's
  forward, an EMA) and stays in the step; so is a site first met inside the first step.
  A site met again in the same stretch between steps as its evaluation is one too
  (``evaluate()`` called once per validation set). A site whose pass was a rollout
  (pass_meter.py: an environment's steps between its forward calls) is a pass each time,
  even after every step (DQN's few env steps between updates). In a closure optimizer's loop
  (LBFGS) training is all inside ``opt.step(closure)``: any region between its steps is a
  pass. A region entered in torch.nn or torch.optim code (a module's
  ``.to()``/``.cpu()``, weight init, gradient clipping) is torch's housekeeping, not a pass.

A ``torch.save`` on another thread than training's (an async checkpoint) cuts nothing:
before any training, one on another thread than main; it is reported as
``checkpoint_overlapped`` time, overlapping the steps around it.

An interval still open when the job exits (a final test pass after the last step) ends
at the exit.

It closes at the loop's next training activity (saves on their own, once training was
seen: where the last of them returned, so a burst of saves is one checkpoint): a grad-enabled batch from a training
loader, ``backward()``, an optimizer step, ``perftop.step()``. The kind: ``checkpoint``
for the time inside ``torch.save``, ``eval`` for the rest when evaluation batches were
seen (a gap with only saves is all ``checkpoint``). An interval begins where its pass does
(the region's entry, the save's start), not where the last step ended: the loop's code
before it (after the update: a log line, ``state_dict()``) stays in the next step, as when
no pass comes, and the interval is cut out of that step's length. One opened by an
evaluation's batch (no region around its loop: an ``inference_mode`` loop, the HF
Trainer's) begins where the last step ended: its pass began before that batch, unseen
(the loader's workers starting, the loop's setup). An interval that starts inside a step
(after its batch, before its backward) is cut out of that step.

Cold paths only (a few calls per evaluation pass), so plain Python even when the tracker
is compiled; the hot checks (``pend``, ``in_gap``) are the tracker's own attributes.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any

from perftop.hook.steps_cold import release

if TYPE_CHECKING:  # the tracker whose rare paths these are (no import at run time)
    from perftop.hook.shape import Tracker


# Where a no_grad region is torch's own housekeeping, not a pass over data: a module's
# .to()/.cpu() (Module._apply), weight init, an optimizer's or clipping's internals.
# A forward run by autograd (a Function's, activation checkpointing's recomputation) is a
# step's own work, never a pass.
_HOUSEKEEPING = (
    *(os.sep + os.path.join("torch", d) + os.sep for d in ("nn", "optim", "autograd")),
    os.sep + os.path.join("torch", "utils", "checkpoint.py"),
)
_MODULE_CALL = os.sep + os.path.join("torch", "nn", "modules", "module.py")
_OURS = os.sep + os.path.join("perftop", "hook") + os.sep
_TORCH = os.sep + "torch" + os.sep  # torch's own frames: a decorator's wrapper
_MAX_SITES = 4096  # sites remembered (code lines: a real loop has a handful)
EVAL, CHECKPOINT, OVERLAPPED = "eval", "checkpoint", "checkpoint_overlapped"


def reset(tr: Tracker) -> None:
    tr.train_loaders = set()  # loaders whose batches fed training (keys set on iterators)
    tr.train_last = None  # the last loader found in it
    tr.fetch_loader = None  # before any training: loaders seen, for training to confirm
    tr.in_gap = False
    tr.gap_t0 = 0.0
    tr.gap_t1 = 0.0  # where the last interval ended
    tr.gap_eval = False
    tr.save_s = tr.save_t0 = tr.save_end = 0.0
    tr.save_alone = False  # a checkpoint of saves alone: it ends where its last save did
    tr.pend = False  # a batch from an unknown loader: eval, or training if training follows
    tr.pend_t0 = tr.pend_t1 = 0.0
    tr.pend_got = False
    tr.pend_loader = None
    tr.region = None
    # a no_grad call site -> (step index where last met, after it, whether it was a pass)
    tr.ng_sites = {}


def enter(tr: Tracker, t: float, is_eval: bool, seen: bool = True) -> None:
    """Something that is not training started at ``t``; ``seen``: the pass began there (a
    region's entry, a save's start), not only its first batch was fetched there."""
    if not tr.in_gap:
        tr.lazy_close(t)
        if tr.held:
            release(tr)  # held steps must not merge across the interval
        tr.in_gap = True
        tr.gap_eval = False
        tr.save_s = 0.0
        if seen or (tr.running and tr.active()):
            # The interval begins where the pass does. The loop's own code before it (after
            # the last update: a log line, a sync) stays in the step it belongs to, the next
            # one (as when no pass comes): the interval is cut out of that step.
            tr.gap_t0 = t
        else:
            # An evaluation's first batch: its pass began before it, unseen (its loader's
            # workers starting, an inference_mode loop's setup): from the last step's end,
            # or the end of an interval since then (a checkpoint: never counted twice).
            tr.gap_t0 = max(tr.start, tr.gap_t1) if tr.running else t
            tr.running = False  # the next step starts where the interval ends
        cb = tr.on_open
        if cb is not None:
            cb(EVAL if is_eval else CHECKPOINT, tr.gap_t0)
    if is_eval:
        tr.gap_eval = True
        seen_batch = getattr(tr.region, "batch_seen", None) if not seen else None
        if seen_batch is not None:
            seen_batch()  # a loader's batch in a pass a forward opened: an evaluation


def end(tr: Tracker, t: float) -> float:
    """Training resumed at ``t``. A checkpoint of saves only (a burst: model, optimizer,
    state) is one pass from its first save's start to its last save's return: what comes
    after that is the next step's (its batch, its forward)."""
    if tr.save_alone and not tr.gap_eval:
        t = max(tr.gap_t0, min(t, tr.save_end))
    tr.save_alone = False
    tr.in_gap = False
    region, tr.region = tr.region, None
    tr.gap_t1 = t
    length = max(0.0, t - tr.gap_t0)
    kind, site, fwd = EVAL, "", -1.0
    verdict = getattr(region, "verdict", None)
    if verdict is not None:  # opened by a forward with grad off: what it held (pass_meter)
        kind, site, fwd = verdict(max(0.0, length - min(tr.save_s, length)))
    if tr.running:
        tr.hole += t - max(tr.gap_t0, tr.start)
    else:  # the step restarts where the interval ends: what was cut out before is behind
        tr.running = True
        tr.start = t
        tr.hole = 0.0
    cb = tr.on_between
    if cb is None or length <= 0.0:
        return t
    save = min(tr.save_s, length)
    named = (site, fwd) if site or fwd >= 0.0 else ()  # a forward's pass: what it held
    if save > 0.0 and tr.gap_eval:
        cb(CHECKPOINT, tr.save_t0, save)
        # an evaluation after the checkpoint's saves begins where they ended
        t0 = tr.save_end if tr.save_t0 <= tr.gap_t0 else tr.gap_t0
        cb(kind, t0, length - save, *named)
    elif save > 0.0:
        cb(CHECKPOINT, tr.gap_t0, length)
    else:
        cb(kind, tr.gap_t0, length, *named)
    return t


def saved(tr: Tracker, t0: float, t1: float) -> None:
    """A ``torch.save`` call from ``t0`` to ``t1``."""
    if tr.pend:
        pending_was_eval(tr)
    alone = not tr.in_gap
    enter(tr, t0, False)
    if tr.save_s == 0.0:
        tr.save_t0 = t0
    tr.save_s += t1 - t0
    tr.save_end = t1
    tr.last_end = t1
    if alone and tr.thread != 0:
        # A checkpoint on its own, once training was seen: the saves until training resumes
        # are one pass (end() cuts it at the last save's return).
        tr.save_alone = True


def pend_fetch(tr: Tracker, t0: float, t1: float, got: bool, loader: Any) -> None:
    tr.pend = True
    tr.pend_t0, tr.pend_t1, tr.pend_got, tr.pend_loader = t0, t1, got, loader


def pending_was_eval(tr: Tracker) -> None:
    """Another batch came before any training: the pending one was an evaluation's."""
    tr.pend = False
    enter(tr, tr.pend_t0, True, False)


def training(tr: Tracker, t: float) -> bool:
    """Training activity at ``t``; True when it ended an interval right there."""
    ended = False
    if tr.pend:  # the pending batch fed training: its loader is a training loader now
        tr.pend = False
        tr.train_loaders.add(tr.pend_loader)
        if tr.in_gap:
            end(tr, tr.pend_t0)
        elif not tr.running:
            tr.running = True
            tr.start = tr.pend_t0
        tr.data += tr.pend_t1 - tr.pend_t0
        if tr.pend_got and not tr.has_fetch:
            tr.has_fetch = True
            if tr.on_fetched is not None:
                tr.on_fetched()
    elif tr.in_gap:
        ended = end(tr, t) >= t  # else the next step began earlier: at a checkpoint's end
    if tr.fetch_loader is not None:
        tr.train_loaders.update(tr.fetch_loader)
        tr.fetch_loader = None
    return ended


def region_enter(tr: Tracker, ctx: Any, t: float) -> None:
    """A ``no_grad`` region entered with grad on at ``t`` (module docstring)."""
    if tr.thread == 0 or (tr.in_gap and not tr.save_alone) or tr.pend or tr.in_opt is not None:
        return  # before training (a model's init), inside an optimizer step (LBFGS's)
    site = _site()
    if site is None:
        return  # torch's housekeeping
    index, sites = tr.index, tr.ng_sites
    last = sites.get(site)
    inside = tr.running and tr.active()
    if tr.closure_s > 0.0 and not inside:
        per_step = False  # between a closure optimizer's steps: no training there
    elif not inside and site in getattr(ctx, "rollout_sites", ()):
        per_step = False  # a rollout's site (pass_meter): an environment's steps, not a step's
    elif last is None:
        per_step = inside and index == 0  # first met in the first step: its own work
    elif last[2] and last[1] == index and not inside:
        per_step = False  # an evaluation's site again, in the same stretch between steps
    else:
        per_step = last[0] >= index - 1
    if not per_step:
        enter(tr, t, True)  # (a lazy source's step closes here: the index moves on)
        tr.region = ctx
    if len(sites) < _MAX_SITES:
        sites[site] = (index, tr.index, not per_step)


def region_exit(tr: Tracker, t: float) -> None:
    """The region that opened the interval exited at ``t``: the next step starts there.
    Its module calls took the one-shot first-forward timer (first_forward.py) of a step
    that times it: armed again, so the step's own first forward after the pass is timed
    (the pass cut out of the wait as it is out of the step)."""
    if tr.in_gap:
        end(tr, t)
        if tr.timing and not (tr.has_fetch or tr.has_bwd) and tr.on_arm is not None:
            tr.on_arm()
    tr.region = None


def site() -> Any:
    """The call site of the module call being made (a forward hook's caller), as ``_site``."""
    return _site()


def _site() -> Any:
    """Where the region was entered: the code and line of the first frame that is neither
    perftop's nor torch's (a ``with`` line; for a decorated function, the line calling
    it); None where torch.nn or torch.optim code entered it (a module's ``.cpu()`` around
    a checkpoint, clipping, init: housekeeping). Per step in a loop without an optimizer
    (its update's region): each file's kind is looked up once."""
    f: Any = sys._getframe(1)
    kinds = _FILE_KINDS
    for _ in range(12):
        if f is None:
            return None
        code = f.f_code
        kind = kinds.get(code.co_filename)
        if kind is None:
            kind = _file_kind(code.co_filename)
        if kind == _USER:
            return (code, f.f_lasti)  # the instruction: cheaper than its line
        if kind == _HOUSE:
            return None
        f = f.f_back
    return None


_USER, _SKIP, _HOUSE = 0, 1, 2
_FILE_KINDS: dict[str, int] = {}


def _file_kind(name: str) -> int:
    if _OURS in name or name.endswith(_MODULE_CALL):
        kind = _SKIP  # perftop's frames; Module.__call__'s machinery around a forward
    elif any(p in name for p in _HOUSEKEEPING):
        kind = _HOUSE
    else:
        kind = _SKIP if _TORCH in name else _USER
    if len(_FILE_KINDS) < _MAX_SITES:
        _FILE_KINDS[name] = kind
    return kind
