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
  Regions: :mod:`perftop.hook.gap_regions`.

A ``torch.save`` on another thread than training's (an async checkpoint) cuts nothing:
before any training, one on another thread than main; it is reported as
``checkpoint_overlapped`` time, overlapping the steps around it.

An interval still open when the job exits (a final test pass after the last step) ends
at the exit, less the training thread's time off the CPU since the pass's last module
call, its last batch (a pass its batches opened: an ``inference_mode`` loop over a
validation loader) or its last save's return (:func:`at_exit`): a process that idles
after its last work (a sleep, a wait for other workers, a log's upload) holds no pass in
that time.

It closes at the loop's next training activity (saves on their own, once training was
seen: where the last of them returned, so a burst of saves is one checkpoint, unless the
training thread wrote 1 MiB or more after it, the checkpoint's file serialized into memory
first, as Lightning's ``_atomic_save`` does: then at that activity): a grad-enabled batch from a training
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

import time
from typing import TYPE_CHECKING, Any

from perftop.hook.gap_bounds import OVERLAPPED as OVERLAPPED  # read by steps.py here,
from perftop.hook.gap_bounds import (
    after_save,
    end,
    enter,
    run_delay,
    worked_since,
    written,
)
from perftop.hook.gap_bounds import at_exit as at_exit  # as gaps.<name>
from perftop.hook.gap_site import fetch_site
from perftop.hook.steps_cold import trim_before_training

if TYPE_CHECKING:  # the tracker whose rare paths these are (no import at run time)
    from perftop.hook.shape import Tracker

READ_AHEAD_S = 0.001  # a loader's next batch this soon after its first: read ahead


def reset(tr: Tracker) -> None:
    tr.train_loaders = set()  # loaders whose batches fed training (keys set on iterators)
    tr.train_last = None  # the last loader found in it
    tr.fetch_loader = None  # before any training: loaders seen, for training to confirm
    tr.in_gap = False
    tr.gap_t0 = 0.0
    tr.gap_t1 = 0.0  # where the last interval ended
    tr.gap_seen = 0.0  # where the open interval's pass was first seen (gap_bounds.enter)
    tr.gap_eval = False
    tr.save_s = tr.save_t0 = tr.save_end = 0.0
    tr.save_w, tr.save_c, tr.save_q = -1.0, 0.0, -1.0
    tr.pre_end = -1.0  # where a loader that ended before any training ended (steps_cold)
    tr.save_alone = False  # a checkpoint of saves alone: it ends where its last save did
    tr.pend = False  # a batch from an unknown loader: eval, or training if training follows
    tr.pend_t0 = tr.pend_t1 = 0.0
    tr.batch_t = tr.batch_c = 0.0
    tr.batch_site = None
    tr.pend_got = False
    tr.pend_loader = None
    tr.eval_loader = None  # the last loader not of training found an evaluation's
    tr.pend_site = None  # the function that fetched the pending batch (its pass's name)
    tr.region = None
    tr.cand = None  # (a forward's hook, retro): the pass a pending batch would open
    # a no_grad call site -> (step index where last met, after it, whether it was a pass)
    tr.ng_sites = {}


def saving(tr: Tracker, t0: float) -> None:
    """A ``torch.save`` call begins at ``t0``: the interval opens here, so the monitor knows
    a checkpoint runs while its file is written (a multi-GB model's takes seconds: no
    stalled step), and the open's send (at once, for a checkpoint) is the checkpoint's time,
    not the next step's. :func:`saved` books the call when it returns."""
    if tr.pend:
        pending_was_eval(tr)
    alone = not tr.in_gap
    enter(tr, t0, False)
    if tr.save_s == 0.0:
        tr.save_t0 = t0
    if alone and tr.thread != 0:
        # A checkpoint on its own, once training was seen: the saves until training resumes
        # are one pass (end() cuts it at the last save's return).
        tr.save_alone = True


def saved(tr: Tracker, t0: float, t1: float) -> None:
    """The ``torch.save`` call :func:`saving` saw begin at ``t0`` returned at ``t1``
    (:func:`saving` again is a no-op then, and opens the interval where it was not seen),
    or where the counters read at its return were, if later: reading the thread's CPU
    clock lets the kernel end its time slice there (a loaded host: 2-13 ms off the CPU in
    a third of them), and that wait, inside the job's own timer around the save, is the
    checkpoint's, not the next step's."""
    tr.save_w, tr.save_c, tr.save_q = float(written()), time.thread_time(), run_delay()
    t1 = max(t1, tr.clock())
    saving(tr, t0)
    if tr.save_s > 0.0 and t0 > tr.save_end and not worked_since(tr, tr.save_end):
        # The code between two saves of a burst (its state dicts, RNG states, folders) is
        # the checkpoint's, where no evaluation's work came between: a checkpoint beside an
        # evaluation is its saves' span, as one alone is (save_state's, on a loaded host:
        # 12 of 79 ms between its files).
        tr.save_s += t0 - tr.save_end
    tr.save_s += t1 - t0
    tr.save_end = t1
    tr.last_end = t1


def eval_batch(tr: Tracker, t0: float, t1: float) -> None:
    """A batch fetched with grad off from ``t0`` to ``t1``: an evaluation's."""
    enter(tr, t0, True, False)
    _batch_done(tr, t0, t1)


def _batch_done(tr: Tracker, t0: float, t1: float) -> None:
    """A batch that may be a pass's, fetched from ``t0`` to ``t1``: where the pass's work
    was last seen, with the thread's CPU time, for a pass its batches opened (no module
    call of ours holds those): at the exit, the time after it off the CPU is idle
    (:func:`at_exit`). The CPU clock first, as at a save's return (:func:`saved`): a wait
    for a core its read ends is the batch's, not idle. The first batch after a
    checkpoint's saves ends what the checkpoint can hold (``gap_bounds.after_save``)."""
    if tr.save_w >= 0.0 and tr.save_s > 0.0 and t0 > tr.save_end:
        after_save(tr, t0)
    tr.batch_c = time.thread_time()
    tr.batch_t = max(t1, tr.clock())


def pend_fetch(tr: Tracker, t0: float, t1: float, got: bool, loader: Any) -> None:
    tr.pend = True
    tr.pend_t0, tr.pend_t1, tr.pend_got, tr.pend_loader = t0, t1, got, loader
    # Where its loop fetched it, read only where a pass may open (may_pend: outside an
    # interval); each later batch of an open pass comes here too, and needs none
    tr.pend_site = None if tr.in_gap else fetch_site()
    _batch_done(tr, t0, t1)


def read_ahead(tr: Tracker, t0: float) -> bool:
    """The pending batch's loader fetched again at ``t0``, with no forward with grad off
    between (``cand``): read ahead (a prefetching wrapper over a loader made anew each
    epoch), not an evaluation's first batch, where no module call at all came between
    them (the forward pre-hook armed at the step's end still waits: a busy host may
    preempt the wrapper between its fetches for milliseconds); not where that hook fired
    after the first (a forward came between); else (no such hook: a compiled model; or
    it fired before the first batch), where the next fetch came within
    :data:`READ_AHEAD_S`."""
    watching = tr.watching
    seen = None if watching is None else watching(tr.pend_t1)
    # a module call after the batch (the hook fired: an evaluation's forward with grad
    # on) is no read ahead, however soon the next batch came (a small model's forward)
    return seen if seen is not None else t0 - tr.pend_t1 < READ_AHEAD_S


def pending_was_eval(tr: Tracker) -> None:
    """Another batch came before any training: the pending one was an evaluation's. Where
    a forward with grad off came after it (``cand``), that forward's hook holds the pass
    (its function, its time inside forward calls) and a forward with grad on ends it."""
    tr.pend = False
    if tr.pend_loader not in tr.train_loaders:
        tr.eval_loader = tr.pend_loader
    cand, tr.cand = tr.cand, None
    if cand is not None and not tr.in_gap:
        if cand[1]:  # the step's own batch, counted in it: the evaluation's, not the step's
            tr.data = max(0.0, tr.data - (tr.pend_t1 - tr.pend_t0))
            tr.has_fetch = False
        tr.region = cand[0]
    enter(tr, tr.pend_t0, True, False)


def train_fetch(tr: Tracker, t0: float, t1: float, got: bool, loader: Any) -> bool:
    """A batch with grad on from a training loader while an interval is open or a batch
    pends; True where it is taken here (the step's fetch is not counted). In a pass that a
    forward with grad off holds (ignite's evaluator iterating the training loader with
    grad on) a batch pends: the pass's if a forward with grad off or another batch comes
    next, the next step's (the pass ending at its fetch) if training does. The loader's
    end (``StopIteration``), then a batch, is an epoch's turn (a new iterator of it, a
    prefetcher's reload): one fetch, still pending, no evaluation's batch."""
    if tr.pend and tr.in_gap and not tr.pend_got:
        if loader is not tr.pend_loader:
            # Another loader's end (a validation fetched with grad on, as skorch's), then
            # this training batch: what ran between them (the epoch's end: its scores, a
            # printed row) is the pass's, which runs to this fetch; the step's wait is this
            # fetch alone (it was the loop's whole epoch end, as data wait).
            tr.pend_t0 = t0
        tr.pend_t1, tr.pend_got, tr.pend_loader = t1, got, loader
        tr.last_end = t1
        _batch_done(tr, t0, t1)
        return True
    if tr.pend:
        if not tr.in_gap and (
            tr.cand is None or (tr.cand[1] and loader is not tr.pend_loader)
        ):  # an unknown loader's batch, then a training one's; the step's batch, then
            return False  # another loader's (a teacher's forward between): training decides
        resumed = getattr(tr.region, "resumed", None)
        if tr.in_gap and tr.cand is None and loader is tr.pend_loader and resumed is not None:
            # The pending batch's loader again, no forward between (an evaluation over the
            # training loader makes one, with grad off): the next step's batches fetched
            # before its first forward (the HF Trainer's micro-batches). The pass ended at
            # the first one's fetch, as where a forward with grad on follows it.
            resumed(t0)
            return False
        pending_was_eval(tr)
    if getattr(tr.region, "verdict", None) is not None and tr.batch_site is None:
        pend_fetch(tr, t0, t1, got, loader)
        tr.last_end = t1
        return True
    # A pass its first batch opened (its hook holds it: first_forward.py) ends at a
    # training loader's batch, as before the hook held it: a prefetcher's next batch
    # after it (Lightning's, at an epoch's start) is no evaluation's.
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
    if tr.pend and tr.in_gap and tr.pend_loader is tr.eval_loader:
        # The open pass's loader, found an evaluation's by its batches, then training with
        # no training loader's batch between (a feeder's or a slicing loop): its last batch
        # (its end, where the loop ran it to the end) was the pass's, which ends there.
        # What came after it (the evaluation's last forward and its score, the loop's code
        # before this) is not seen: the next step's.
        tr.pend = False
        end(tr, tr.pend_t1)
    elif tr.pend:  # the pending batch fed training: its loader is a training loader now
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
        trim_before_training(tr)
    return ended
