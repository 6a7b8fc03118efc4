"""Where an interval between steps opens and where it ends (at training's next activity,
or at the job's exit), and the kinds it is reported as. Below gaps.py's signals, apart from
them: each signal opens or ends an interval through these, and so does the forward
pre-hook's side (gap_forward.py), which gaps.py does not import.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING

from perftop.hook.pass_names import site_name
from perftop.hook.steps_cold import release

BACKWARD, OPTIMIZER = 2, 3  # steps.BACKWARD, steps.OPTIMIZER (steps imports this module)

if TYPE_CHECKING:  # the tracker whose rare paths these are (no import at run time)
    from perftop.hook.shape import Tracker

EVAL, CHECKPOINT, OVERLAPPED = "eval", "checkpoint", "checkpoint_overlapped"
# Bytes the training thread writes after a checkpoint's last torch.save returned and before
# training resumes that make that stretch the checkpoint's too: its file, serialized into
# memory first (Lightning's ``_atomic_save``: torch.save into a BytesIO, then fsspec
# writes it). A log line or a small JSON (the HF Trainer's state) is far less.
WRITE_MIN = 1 << 20
_IO = "/proc/thread-self/io"
_SCHEDSTAT = "/proc/thread-self/schedstat"


def written() -> int:
    """The bytes this thread has passed to ``write()`` and its kin so far (``wchar`` in
    /proc/thread-self/io: files, pipes, sockets alike); -1 where it cannot be read (no
    such file, no task I/O accounting). Read once per save and once where a checkpoint
    ends: never on a step's way."""
    try:
        with open(_IO, "rb") as f:
            for line in f.read().split(b"\n"):
                if line.startswith(b"wchar:"):
                    return int(line[6:])
    except (OSError, ValueError):
        pass
    return -1


def run_delay() -> float:
    """Seconds this thread has waited for a core so far (``/proc/thread-self/schedstat``'s
    second field: runnable, not running); -1 where it cannot be read. Read once per save
    and once at the exit: never on a step's way."""
    try:
        with open(_SCHEDSTAT, "rb") as f:
            return int(f.read(128).split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return -1.0


def wrote_after_save(tr: Tracker) -> bool:
    """The training thread wrote :data:`WRITE_MIN` bytes or more since its last save
    returned (on that thread, where both counts were read)."""
    if tr.save_w < 0.0 or threading.get_ident() != tr.thread:
        return False
    now = written()
    return now >= 0 and now - tr.save_w >= WRITE_MIN


def after_save(tr: Tracker, t0: float) -> None:
    """A batch fetched from ``t0`` after the last save returned: where the training thread
    wrote a file's worth since that save (mmengine's checkpoint: ``torch.save`` into a
    BytesIO, then the file), the checkpoint ran to here and the evaluation after it starts
    here; either way, what is written from now on is not the checkpoint's. (Left to the
    pass's end, a training batch pending at the evaluation loader's end would read as the
    last work, later than the pass: the checkpoint took the evaluation's time.)"""
    if wrote_after_save(tr):
        tr.save_s += t0 - tr.save_end
        tr.save_end = t0
    tr.save_w = -1.0


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
        tr.gap_seen = t  # (an evaluation's first batch: the interval may begin before it)
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
            # ... and what the step had timed so far is the interval's: the training
            # loader's last call, its StopIteration (its workers joined: 10-20 ms), was
            # counted again in the next step's data, whose forward read 0
            tr.data = 0.0
            if tr.fwd_wait > 0.0:
                tr.fwd_wait = 0.0
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
    after that is the next step's (its batch, its forward), unless the training thread
    wrote a file's worth of bytes in it (:func:`wrote_after_save`): the checkpoint's file,
    written after its serialization, and the checkpoint runs to ``t``."""
    if tr.save_alone and not tr.gap_eval and not wrote_after_save(tr):
        t = max(tr.gap_t0, min(t, tr.save_end))
    elif tr.save_s > 0.0 and t < tr.save_end:
        t = tr.save_end  # a pass with saves in it ends after its last save returned
    tr.save_alone = False
    tr.in_gap = False
    tr.gap_t1 = t
    length = max(0.0, t - tr.gap_t0)
    # the checkpoint's own time: its saves, and its file written after them where it was
    save = min(tr.save_s + (_write_tail(tr, t) if tr.gap_eval else 0.0), length)
    region, tr.region = tr.region, None
    kind, site, fwd = EVAL, "", -1.0
    verdict = getattr(region, "verdict", None)
    if verdict is not None:  # opened by a forward with grad off: what it held (pass_meter)
        kind, site, fwd = verdict(max(0.0, length - save))
    elif tr.batch_site is not None and tr.gap_eval:  # opened by a batch: the function that
        site = site_name(tr.batch_site)  # made its first module call (first_forward.py)
    tr.batch_site = None
    if tr.running:
        tr.hole += t - max(tr.gap_t0, tr.start)
    else:  # the step restarts where the interval ends: what was cut out before is behind
        tr.running = True
        tr.start = t
        tr.hole = 0.0
    cb = tr.on_between
    if cb is None or length <= 0.0:
        return t
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


def _last_work(region: object) -> tuple[float | None, float | None]:
    """Wall and CPU time of a forward's pass's last module call (its last forward's
    return, where its forward hook has it); (None, None) for another region or none."""
    last_out = getattr(region, "last_out", None)
    if last_out is not None:
        last_out()
    return getattr(region, "t0", None), getattr(region, "c0", None)


def _write_tail(tr: Tracker, t: float) -> float:
    """In an evaluation's pass, the time from its last save's return to ``t`` where that
    was the checkpoint's file being written (:func:`wrote_after_save`) and no evaluation's
    work came after the save (a batch, a module call): Lightning's ``ModelCheckpoint`` at
    a validation's end serializes into memory, then writes. Else 0."""
    if tr.save_s <= 0.0 or t <= tr.save_end or worked_since(tr, tr.save_end, t):
        return 0.0
    return t - tr.save_end if wrote_after_save(tr) else 0.0


def worked_since(tr: Tracker, t: float, until: float = float("inf")) -> bool:
    """An evaluation's work (a batch, a module call of a forward's pass) came after ``t``,
    and by ``until`` (the pass's end: the next step's batch, fetched after it while the
    pass's hook decides whose it was, is no work of the pass)."""
    work, _ = _last_work(tr.region)
    return any(t < m <= until for m in (tr.batch_t, work if isinstance(work, float) else 0.0))


def at_exit(tr: Tracker, now: float) -> float:
    """Where an interval still open at the job's exit ends: ``now``, less the time the
    training thread spent off the CPU since the pass's last module call (a forward's
    pass: its hooks keep the wall and CPU time where its last forward returned), or its
    last batch's return (a pass its batches opened, which no hook of ours holds:
    ``gaps.eval_batch``), or, where a save came after it, since the save returned (its
    file's writing is off the CPU too, and the pass's); a checkpoint of saves alone, since
    its last save returned, less its waits for a core since (:func:`run_delay`). So a
    final test and a last save
    hold their own time, not the idle after them (a Ray worker's wait for the others, a
    sleep). Only on the training thread (its CPU clock), at the interpreter's exit;
    elsewhere (the sender's tick after the training thread ended) ``now``."""
    region = tr.region
    t0, c0 = _last_work(region)
    if (t0 is None or c0 is None) and tr.batch_t > 0.0 and tr.batch_t >= tr.gap_t0:
        t0, c0 = tr.batch_t, tr.batch_c  # the last batch of a pass its batches opened
    q0 = -1.0
    if (t0 is None or c0 is None) and tr.save_s > 0.0 and tr.save_end >= tr.gap_t0:
        t0, c0 = tr.save_end, tr.save_c  # a checkpoint's last save (its file written after)
        q0 = tr.save_q
    if t0 is None or c0 is None or threading.get_ident() != tr.thread:
        return now
    idle = max(0.0, now - t0 - (time.thread_time() - c0))
    if q0 >= 0.0 and (q := run_delay()) >= q0:
        # after a checkpoint's saves, its own code went on (its config files: LitGPT's
        # last checkpoint read 451 of its 768 ms on a busy host): a wait for a core is
        # that code's, not idle
        idle = max(0.0, idle - (q - q0))
    if tr.save_s > 0.0 and tr.save_end > t0:
        idle = min(idle, max(0.0, now - tr.save_end))
    tail = getattr(region, "tail", None)
    gs = tail() if tail is not None else None
    if gs is not None:  # a sync after the last forward: the pass's own work, up to there
        idle = min(idle, max(0.0, now - gs[0]))
    return max(tr.gap_t0, now - idle)
