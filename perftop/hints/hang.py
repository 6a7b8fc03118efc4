"""``collective-hang``: a collective that some rank never entered while the others wait in
it (a hang, as :mod:`perftop.model.comm` judges one), or ranks that entered different
collectives at one sequence id (a desync). The job makes no step while it lasts: the Hints
panel said "nothing found that slowed this job down" beside the Ranks panel's hang.

Live, a hang counts while it is under way, and all of the time is at stake while it lasts
(it comes first); the whole-run verdict counts every one the run had
(:func:`perftop.hints.verdict.whole_run_view` keeps them as they were), at stake the time
the ranks waited in it. Where a rank
that never entered stands comes from the stacks dumped for the hang (a stall capture of a
collective), when py-spy could read them.
"""

from __future__ import annotations

from dataclasses import replace

from perftop.codepath import code_line
from perftop.fmt import held_words
from perftop.hints.base import fraction
from perftop.model.comm_rows import HangRow
from perftop.model.snapshot import Hint, Snapshot
from perftop.model.stacks import place
from perftop.model.stands import cause_of, ended_row, first_stack, hang_called, held, how_ended

GLOO_TIMEOUT_MIN, NCCL_TIMEOUT_MIN = 30, 10  # torch's default process group timeouts


def collective_hang(snap: Snapshot, active: frozenset[str]) -> list[Hint]:
    rows = [h for h in snap.comm.hangs if h.ongoing or h.desync]
    if not rows:
        return []
    h = max(rows, key=lambda r: (r.ongoing, r.waited_s))
    # where the missing ranks stand first: what the panel shows when it has room for little
    evidence = []
    for r in h.missing:
        # (the last its hook sent: a stopped rank's later collectives reach perftop after)
        last = f" (its last seen: {r.last_op} #{r.last_seq})" if r.last_seq is not None else ""
        frames, _ = first_stack(snap, r.pid, h.t_created, r.host)
        stands = place(frames) if frames else ""
        state = held(snap, r.pid, h.t_created, r.host)
        text = f"{r.label} never entered it{last}"
        if stands:
            text += f"; it stands {stands}"
        if state:
            text += f"; its process is {held_words(state, r.pid)}"
        end = ended_row(snap, r.pid, r.host, hang_called(h))
        if end is not None:  # dead: no stack, and no collective will ever come from it
            text += f"; its process {how_ended(snap, end)}{cause_of(snap, end)}"
        evidence.append(text)
    for r in h.ranks:
        if r.entered:
            at = f", launched at {code_line(r.line)}" if r.line else ""
            what = "entered" if h.desync else "waits in"
            evidence.append(f"{r.label} {what} {r.op or h.op} of {h.pg} #{h.seq} "
                            f"(sizes {h.sizes}){at}")  # fmt: skip
    if h.desync:
        title = f"Desync: the ranks entered different collectives at {h.pg} #{h.seq}"
        advice = [
            "The ranks called their collectives in different orders: look for a collective "
            "inside a branch that depends on the rank (if rank == 0: …), or ranks that run "
            "different numbers of batches (an uneven last batch without drop_last, a "
            "sampler that is not a DistributedSampler).",
        ]
    else:
        # (a node's session sees its own ranks: the one missing is on another)
        missing = ", ".join(r.label for r in h.missing) or "a rank on another node"
        title = f"Hang: {h.op} has waited {h.waited_s:.0f} s for {missing}"
        advice = [
            f"{missing} is not in the collective: where it stands (above) is what it does "
            "instead. A collective only some ranks reach (inside if rank == 0: …, after an "
            "exception one rank caught, after a loop one rank left early) leaves the others "
            "waiting.",
            "Give the process group a timeout that fits a step, so that a hang fails with "
            "an error instead of waiting: init_process_group(timeout=timedelta(minutes=…)) "
            f"(torch's default: {GLOO_TIMEOUT_MIN} minutes for gloo, {NCCL_TIMEOUT_MIN} for "
            "NCCL).",
        ]
    elapsed = snap.meta.elapsed_s
    share = min(1.0, h.waited_s / elapsed) if elapsed and h.waited_s else None
    gain_text = (
        f"the {h.waited_s:.0f} s the ranks waited in it, {fraction(share)} of the run"
        if share is not None
        else "the run, if the ranks never agree"
    )
    gain = share
    if h.ongoing and not h.desync and not snap.meta.ended:  # live, under way: first
        gain, gain_text = 1.0, f"all of it while it lasts: no rank steps ({gain_text} so far)"
    return [
        Hint(
            id="collective-hang",
            severity="high",
            title=title,
            evidence=tuple(evidence),
            advice=tuple(advice),
            est_gain=round(gain, 4) if gain is not None else None,
            est_gain_text=gain_text,
            panel="ranks",
        )
    ]


def as_ran(hangs: tuple[HangRow, ...]) -> tuple[HangRow, ...]:
    """The run's hangs as they were under way (the verdict's view of a finished job)."""
    return tuple(replace(h, ongoing=True) for h in hangs)
