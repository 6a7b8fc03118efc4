"""Time outside training steps: an evaluation pass, a checkpoint. Cut out of the steps
around it and reported as its own intervals (``StepTracker.on_between``).

What opens an interval:

- a DataLoader batch fetched with grad disabled (``torch.no_grad``, ``inference_mode``);
- a batch from a loader that has never fed a training step, unless training (backward,
  an optimizer step) follows it before the next batch (then it is the next training
  loader, as in a second ``fit``);
- a batch with grad on from a training loader followed by a forward with grad off (the
  first module call since the step's end) and then another batch of that loader before
  any training: an evaluation over the training loader, ``no_grad`` inside each of its
  iterations (ignite's ``evaluator.run(train_loader)``); the batch pends from that forward
  on (:func:`may_pend`), and training instead makes it the step's (a teacher's forward);
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
  A forward with grad off inside an open pass counts as its site met in that stretch
  (:func:`met_in_pass`: TD3's target network, which a rollout's pass reaches).
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
at the exit, less the training thread's time off the CPU since the pass's last module
call or its last save's return (:func:`at_exit`): a process that idles after its last
work (a sleep, a wait for other workers) holds no pass in that time.

It closes at the loop's next training activity (saves on their own, once training was
seen: where the last of them returned, so a burst of saves is one checkpoint): a grad-enabled batch from a training
loader, ``backward()``, an optimizer step, ``perftop.step()``. In a pass that a forward
with grad off holds, such a batch pends (:func:`train_fetch`): the pass's if a forward
with grad off or another batch follows, the next step's if training does (a forward with
grad on too), and the pass then ends where it was fetched. The kind: ``checkpoint``
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
import threading
import time
from typing import TYPE_CHECKING, Any

from perftop.hook.pass_meter import ROLLOUT
from perftop.hook.steps_cold import release

BACKWARD, OPTIMIZER = 2, 3  # steps.BACKWARD, steps.OPTIMIZER (steps imports this module)

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
READ_AHEAD_S = 0.001  # a loader's next batch this soon after its first: read ahead


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
    tr.cand = None  # (a forward's hook, retro): the pass a pending batch would open
    # a no_grad call site -> (step index where last met, after it, whether it was a pass)
    tr.ng_sites = {}


def enter(tr: Tracker, t: float, is_eval: bool, seen: bool = True, kind: str = EVAL) -> None:
    """Something that is not training started at ``t``; ``seen``: the pass began there (a
    region's entry, a save's start), not only its first batch was fetched there; ``kind``:
    what an evaluation is said to be while it runs (a rollout's site: ``rollout``)."""
    if not tr.in_gap:
        if not _backward_bound(tr):
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
            cb(kind if is_eval else CHECKPOINT, tr.gap_t0)
    if is_eval:
        tr.gap_eval = True
        seen_batch = getattr(tr.region, "batch_seen", None) if not seen else None
        if seen_batch is not None:
            seen_batch()  # a loader's batch in a pass a forward opened: an evaluation


def _backward_bound(tr: Tracker) -> bool:
    """Steps that ``backward()`` ends, in a loop fed without a DataLoader (a manual update,
    a generator): each step runs from one backward's start to the next, its wait for the
    next batch and that batch's forward in it. A pass after the update is cut out of the
    step around it, which goes on after it: closed at the pass (as a lazy source's step
    is), it had no batch and no forward, and the next one two of each (0.5 ms and 7.5 ms
    steps around each pass of a steady 4 ms loop)."""
    return tr.mode == BACKWARD and tr.has_bwd and not tr.has_fetch


def end(tr: Tracker, t: float) -> float:
    """Training resumed at ``t``. A checkpoint of saves only (a burst: model, optimizer,
    state) is one pass from its first save's start to its last save's return: what comes
    after that is the next step's (its batch, its forward)."""
    if tr.save_alone and not tr.gap_eval:
        t = max(tr.gap_t0, min(t, tr.save_end))
    elif tr.save_s > 0.0 and t < tr.save_end:
        t = tr.save_end  # a pass with saves in it ends after its last save returned
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


def at_exit(tr: Tracker, now: float) -> float:
    """Where an interval still open at the job's exit ends: ``now``, less the time the
    training thread spent off the CPU since the pass's last module call (a forward's
    pass: its hooks keep the wall and CPU time where its last forward returned) or, where a save came after it,
    since the save returned (its file's writing is off the CPU too, and the pass's). So a
    final test and a last save hold their own time, not the idle after them (a Ray
    worker's wait for the others, a sleep). Only on the training thread (its CPU clock),
    at the interpreter's exit; elsewhere (the sender's tick after the training thread
    ended) ``now``."""
    region = tr.region
    last_out = getattr(region, "last_out", None)
    if last_out is not None:
        last_out()  # the pass's last forward's return, where its forward hook has it
    t0, c0 = getattr(region, "t0", None), getattr(region, "c0", None)
    if t0 is None or c0 is None or threading.get_ident() != tr.thread:
        return now
    idle = max(0.0, now - t0 - (time.thread_time() - c0))
    if tr.save_s > 0.0 and tr.save_end > t0:
        idle = min(idle, max(0.0, now - tr.save_end))
    tail = getattr(region, "tail", None)
    gs = tail() if tail is not None else None
    if gs is not None:  # a sync after the last forward: the pass's own work, up to there
        idle = min(idle, max(0.0, now - gs[0]))
    return max(tr.gap_t0, now - idle)


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


def saves_done(tr: Tracker, t: float) -> bool:
    """A forward with grad on at ``t`` while a checkpoint of saves alone is open (a loop
    fed without a DataLoader, whose next batch ends no pass): the checkpoint is over, where
    its last save returned (:func:`end`), and the forward is the next step's; True where
    it ended here. An evaluation after the saves (a forward with grad off) joins them."""
    if not (tr.save_alone and not tr.gap_eval):
        return False
    end(tr, t)
    return True


def pend_fetch(tr: Tracker, t0: float, t1: float, got: bool, loader: Any) -> None:
    tr.pend = True
    tr.pend_t0, tr.pend_t1, tr.pend_got, tr.pend_loader = t0, t1, got, loader


def read_ahead(tr: Tracker, t0: float) -> bool:
    """The pending batch's loader fetched again at ``t0``, with no forward with grad off
    between (``cand``): read ahead (a prefetching wrapper over a loader made anew each
    epoch), not an evaluation's first batch, where no module call at all came between
    them (the forward pre-hook armed at the step's end still waits: a busy host may
    preempt the wrapper between its fetches for milliseconds), or, without that hook (a
    compiled model), where the next fetch came within :data:`READ_AHEAD_S`."""
    watching = tr.watching
    return (watching is not None and watching()) or t0 - tr.pend_t1 < READ_AHEAD_S


def pending_was_eval(tr: Tracker) -> None:
    """Another batch came before any training: the pending one was an evaluation's. Where
    a forward with grad off came after it (``cand``), that forward's hook holds the pass
    (its function, its time inside forward calls) and a forward with grad on ends it."""
    tr.pend = False
    cand, tr.cand = tr.cand, None
    if cand is not None and not tr.in_gap:
        if cand[1]:  # the step's own batch, counted in it: the evaluation's, not the step's
            tr.data = max(0.0, tr.data - (tr.pend_t1 - tr.pend_t0))
            tr.has_fetch = False
        tr.region = cand[0]
    enter(tr, tr.pend_t0, True, False)


def may_pend(tr: Tracker) -> bool:
    """Whether a forward with grad off, the first module call since the step's end (that
    of first_forward's hook, armed there), may be an evaluation's after its batch: an
    unknown loader's batch pends, or the step has made a batch and nothing else. That
    is an evaluation's first batch over a training loader (ignite's
    ``evaluator.run(train_loader)``, its ``no_grad`` inside each iteration) or the step's
    own batch before a teacher's forward: :func:`pend_batch` says which, later."""
    if tr.in_gap or tr.in_opt is not None or tr.cand is not None or not tr.running:
        return False
    mark = tr.mark  # a second optimizer stepped after the step's end (a GAN's): its time
    return tr.pend or (  # is this step's optimizer phase so far, and nothing else is
        tr.mode >= OPTIMIZER
        and tr.has_fetch
        and not tr.has_bwd
        and tr.bwd == 0.0
        and tr.opt == (0.0 if mark is None else mark[4])
        and tr.phases is None
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
    tr.pend_t0, tr.pend_t1 = tr.last_end - tr.data, tr.last_end
    tr.cand = (hook, True)


def train_fetch(tr: Tracker, t0: float, t1: float, got: bool, loader: Any) -> bool:
    """A batch with grad on from a training loader while an interval is open or a batch
    pends; True where it is taken here (the step's fetch is not counted). In a pass that a
    forward with grad off holds (ignite's evaluator iterating the training loader with
    grad on) a batch pends: the pass's if a forward with grad off or another batch comes
    next, the next step's (the pass ending at its fetch) if training does. The loader's
    end (``StopIteration``), then a batch, is an epoch's turn (a new iterator of it, a
    prefetcher's reload): one fetch, still pending, no evaluation's batch."""
    if tr.pend and tr.in_gap and not tr.pend_got:
        tr.pend_t1, tr.pend_got, tr.pend_loader = t1, got, loader
        tr.last_end = t1
        return True
    if tr.pend:
        if not tr.in_gap and (
            tr.cand is None or (tr.cand[1] and loader is not tr.pend_loader)
        ):  # an unknown loader's batch, then a training one's; the step's batch, then
            return False  # another loader's (a teacher's forward between): training decides
        pending_was_eval(tr)
    if getattr(tr.region, "verdict", None) is not None:
        pend_fetch(tr, t0, t1, got, loader)
        tr.last_end = t1
        return True
    end(tr, t0)
    return False


def training(tr: Tracker, t: float) -> bool:
    """Training activity at ``t``; True when it ended an interval right there."""
    ended = False
    cand = tr.cand
    if cand is not None:  # the forward after the pending batch was the step's own work
        tr.cand = None
        dropped = getattr(cand[0], "dropped", None)
        if dropped is not None:
            dropped()
        if cand[1]:  # the step's own batch, counted in it already
            tr.pend = False
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
    kind = EVAL  # what the pass is said to be while it runs (its end says what it was)
    if tr.closure_s > 0.0 and not inside:
        per_step = False  # between a closure optimizer's steps: no training there
    elif not inside and site in getattr(ctx, "rollout_sites", ()):
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


_ANON = frozenset(("<lambda>", "<genexpr>", "<listcomp>", "<dictcomp>", "<setcomp>"))


def site() -> tuple[Any, Any]:
    """The call site of the module call being made (a forward hook's caller), as ``_site``,
    and the site that names it: the same, or where a lambda or comprehension was called
    (ignite's evaluator calls the model in its default ``model_fn``, a lambda, from its
    ``evaluate_step``): a name that says what ran."""
    key = _site()
    if key is None or key[0].co_name not in _ANON:
        return key, key
    f: Any = sys._getframe(1)
    while f is not None and f.f_code is not key[0]:
        f = f.f_back
    for _ in range(8):
        if f is None or f.f_code.co_name not in _ANON:
            break
        f = f.f_back
    return key, ((f.f_code, f.f_lasti) if f is not None else key)


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
