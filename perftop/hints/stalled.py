"""``stalled-step``: a training step that stopped for seconds (the stacks the monitor dumped
while it stalled say where each process stood). A job stuck for 12 s in its own code (a
lock, a hung mount, a network call) read only as "data wait 97%" with no hint, its stacks
at the end of the report.

Live, a stalled step counts while it is under way (its process has not ended it), with
all of the time at stake while it lasts; after, stalled steps count when their time over
the median step is ``SHARE`` of the run or more. A stall inside a hung collective, or
dumped while one hung, is ``collective-hang``'s, an evaluation's or checkpoint's that
hangs is ``between-steps``', and a capture after the last step of a job that ended well is
no stall but its work after training (:func:`perftop.model.stacks.after_last_step`).
"""

from __future__ import annotations

from perftop.fmt import held_words, step_no
from perftop.hints.base import fraction, seconds
from perftop.model.outside_rows import StallRow
from perftop.model.roles import role_of_pid
from perftop.model.snapshot import Hint, Snapshot, StepRow, StepStats
from perftop.model.stacks import after_last_step, place
from perftop.model.stands import held

SHARE = 0.10  # the stalled steps' time over the median, as a share of the run
SHOWN = 4  # processes whose place is said
HANG_MARGIN_S = 1.0  # a stall dumped this close to a hung collective's span is the hang's


def _stats(snap: Snapshot, pid: int) -> StepStats | None:
    return next((s for s in (snap.steps, *snap.ranks) if s.pid == pid), None)


def _length(snap: Snapshot, s: StallRow) -> tuple[float, bool]:
    """How long the stalled step took (True), or has taken at least (False: under way, or
    ended out of the recent steps kept)."""
    st = _stats(snap, s.pid)
    row = _row(st.recent, s.step) if st else None
    if row is not None:
        return row.t1 - row.t0, True
    under_way = _under_way(snap, s)
    if under_way and snap.meta.now_t is not None:
        return max(s.stalled_s, snap.meta.now_t - (s.t - s.stalled_s)), False
    return s.stalled_s, False


def _row(recent: tuple[StepRow, ...], index: int) -> StepRow | None:
    """The step ``index`` among a process's recent steps (in order, mostly one apart: found
    where it would stand, else looked for), or None."""
    if not recent or not recent[0].index <= index <= recent[-1].index:
        return None
    at = index - recent[0].index
    if at < len(recent) and recent[at].index == index:
        return recent[at]
    return next((r for r in recent if r.index == index), None)


def _under_way(snap: Snapshot, s: StallRow) -> bool:
    st = _stats(snap, s.pid)
    last = st.recent[-1].index if st and st.recent else -1
    return not snap.meta.ended and last < s.step


def _in_a_hang(snap: Snapshot, s: StallRow) -> bool:
    """Whether ``s`` was dumped while a collective hung (``collective-hang`` says it: the
    waiting ranks' steps stall, and so does the step of the rank that keeps them waiting)."""
    return any(h.t_created - HANG_MARGIN_S <= s.t <= h.t_created + h.waited_s + HANG_MARGIN_S
               for h in snap.comm.hangs if not h.desync)  # fmt: skip


def stalled_step(snap: Snapshot, active: frozenset[str]) -> list[Hint]:
    hung = {(s.pid, s.step) for s in snap.stalls if s.during == "collective"}
    rows = [s for s in snap.stalls
            if not s.during and (s.pid, s.step) not in hung and not _in_a_hang(snap, s)
            and after_last_step(snap, s) is None]  # (a job's work after its last step)  # fmt: skip
    if not rows:
        return []
    now = [s for s in rows if _under_way(snap, s)]
    lengths = {id(s): _length(snap, s) for s in rows}
    excess = sum(max(0.0, lengths[id(s)][0] - s.median_s) for s in rows)
    elapsed = snap.meta.elapsed_s or 0.0
    share = min(1.0, excess / elapsed) if elapsed else 0.0
    if not now and share < SHARE:
        return []
    s = now[-1] if now else max(rows, key=lambda r: lengths[id(r)][0])
    took, ended = lengths[id(s)]
    step = f"step {step_no(s.step)}"
    if now:
        title = f"Stalled: {step} has not ended for {seconds(took)}"
        gain, gain_text = 1.0, f"all of it while it lasts: the loop makes no step ({step})"
    else:
        long = "took" if ended else "took at least"
        title = f"Stalled steps: {step} {long} {seconds(took)} (median {seconds(s.median_s)})"
        many = f"{len(rows)} stalled steps" if len(rows) > 1 else "the stalled step"
        gain, gain_text = share, f"{fraction(share)} of the run: {many} over the median step"
    # where each process stood first: what the panel shows when it has room for little
    evidence = []
    for pid, role, frames in s.stacks[:SHOWN]:
        state = held(snap, pid, s.t, s.host) if now else s.state_of(pid)
        who = role_of_pid(snap, pid, role, s.host)
        held_too = f", {held_words(state, pid)}" if state else ""
        evidence.append(f"{who} (pid {pid}) stood {place(frames)}{held_too}")
    evidence.append(f"{step} of pid {s.pid}: {seconds(took)}{'' if ended or now else ' at least'}"
                    f" against a median step of {seconds(s.median_s)}")  # fmt: skip
    if len(s.stacks) > SHOWN:
        evidence.append(f"and {len(s.stacks) - SHOWN} more processes (the report lists each)")
    if s.note:
        evidence.append(s.note)
    if len(rows) > 1 and not now:
        evidence.append(f"{len(rows)} steps stalled in the run; their stacks are in the report")
    return [
        Hint(
            id="stalled-step",
            severity="high" if now or share >= 0.5 else "medium",
            title=title,
            evidence=tuple(evidence),
            advice=(
                "Where the training process stood (above) is what the step waited for: a "
                "lock, a file on a slow or hung mount, a network call (a logger, a "
                "download), a sleep, a subprocess; the other processes' stacks say who "
                "holds it. k in the TUI shows every stack.",
            ),
            est_gain=round(gain, 4),
            est_gain_text=gain_text,
            panel="steps",
        )
    ]
