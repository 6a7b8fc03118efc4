"""Where a process stood at a moment perftop looked into (a hung collective, a stalled
step), whether it was held there, and how it ended: the one lookup behind the hint, the
Ranks line, the ``k`` screen, the notices and the report, so that they say the same."""

from __future__ import annotations

from collections.abc import Callable

from perftop.events.stacks import HELD_STATES, StackFrame
from perftop.fmt import SIGNAL_CAUSE, exit_tag, exit_words
from perftop.model.comm_rows import HangRow
from perftop.model.roles import role_of_pid
from perftop.model.snapshot import ProcRow, Snapshot


def first_stack(
    snap: Snapshot, pid: int, since: float, host: str = ""
) -> tuple[tuple[StackFrame, ...], str]:
    """The first stack captured of ``pid`` (on node ``host``, a collector's) after
    ``since`` (a stall capture), innermost first: where it stood while the others waited;
    without one, why (a capture's note: no permission, no py-spy), else ""."""
    why = ""
    for st in snap.stalls:
        if st.t < since or (host and st.host and st.host != host):
            continue
        for p, _role, frames in st.stacks:
            if p == pid and frames:
                return frames, ""
        why = why or st.note
    return (), why


def held(snap: Snapshot, pid: int, since: float = 0.0, host: str = "") -> str:
    """Whether ``pid`` (on ``host``, a collector's) is held where it stands (stopped,
    stopped by a tracer, in uninterruptible sleep: ``HELD_STATES``), psutil's word, or "".
    While the job runs, as its process's latest sample reads it; after, as the first stall
    capture after ``since`` that dumped it read it then (the one whose stack the report
    shows)."""
    return held_in(snap)(pid, since, host)


def held_in(snap: Snapshot) -> Callable[[int, float, str], str]:
    """:func:`held` for many pids of one snapshot (a fleet's Ranks table): its live process
    rows are read once, not once a pid."""
    live: dict[int, list[ProcRow]] = {}
    if not snap.meta.ended:
        for p in snap.processes:
            if p.alive:
                live.setdefault(p.pid, []).append(p)

    def of(pid: int, since: float = 0.0, host: str = "") -> str:
        # (a row has a host only where a collector merged nodes)
        row = next((p for p in live.get(pid, ()) if not host or not p.host or p.host == host), None)
        if row is not None:
            return row.state if row.state in HELD_STATES else ""
        for st in snap.stalls:
            if st.t < since or (host and st.host and st.host != host):
                continue
            if st.state_of(pid) or any(p == pid for p, _role, _frames in st.stacks):
                return st.state_of(pid)
        return ""

    return of


def abnormal_ends(snap: Snapshot) -> list[ProcRow]:
    """The job's processes that ended abnormally, as each was seen to end (``ProcExit``),
    in the order they ended: by a signal or with a non-zero code, or, its status reaped by
    its parent before it was read, a training process that ended without its hook's last
    send (a SIGKILL leaves no time for a goodbye) or any that ended as its memory cgroup
    (else the host) counted an OOM kill. The job's own first process only where a signal
    killed it (an exit code is the job's, said as such: the header, the report)."""
    ended = []
    for p in snap.ended:
        code, sig, unread = ending(snap, p)
        root = p.root or p.pid == snap.meta.job_pid  # (each node's, under a collector)
        lost = unread and not root and (snap.cut(p.pid, p.host) or bool(p.oom_kills))
        if p.ended_t is not None and (sig is not None or (code and not root) or lost):
            ended.append(p)
    return sorted(ended, key=lambda p: p.ended_t or 0.0)


def ending(snap: Snapshot, row: ProcRow) -> tuple[int | None, int | None, bool]:
    """(exit code, signal, whether neither was read) of an ended process; the job's first
    process's as the monitor, its parent, read them (``JobExit``)."""
    m = snap.meta
    if row.exit_status is None and row.pid == m.job_pid and m.exit_signal:
        return None, m.exit_signal, False  # (a code may be a survivor's: outlive.py)
    return row.exit_code, row.exit_signal, row.exit_status is None


def end_words(snap: Snapshot, row: ProcRow, first: ProcRow | None = None) -> str:
    """``rank 1 (pid 14271) killed by SIGKILL: the kernel's OOM killer took it …``; after
    ``first`` (the job's first abnormal end), how long after it: what followed."""
    who = role_of_pid(snap, row.pid, "process", row.host)
    on = f" on {row.host}" if row.host else ""  # a collector's node: pids repeat across them
    text = f"{who} (pid {row.pid}{on}) {how_ended(snap, row)}"
    if first is not None and first is not row and first.ended_t and row.ended_t:
        after = role_of_pid(snap, first.pid, "process", first.host)
        return text + f", {row.ended_t - first.ended_t:.2f} s after {after}"
    return text + cause_of(snap, row)


def cause_of(snap: Snapshot, row: ProcRow) -> str:
    """``: …`` what most likely ended it, where its signal (or an abrupt end) says, and
    what the OOM kills counted as it ended add (its memory cgroup's, else the host's);
    else ""."""
    _code, sig, unread = ending(snap, row)
    abrupt = unread and snap.cut(row.pid, row.host)  # no status, and no goodbye either
    counter = "its memory cgroup" if row.oom_source else "the host"
    if (sig == 9 or unread) and row.oom_kills:
        return (": the kernel's OOM killer took it, memory ran out "
                f"({counter} counted an OOM kill as it ended: {row.oom_counted_by})")  # fmt: skip
    if (sig == 9 or abrupt) and row.oom_kills == 0:
        # (who sent it is not known: Ray's shutdown kills its own daemons so, as the job ends)
        how = ("a kill -9 (a user, a scheduler stopping the job, the job's own teardown)" if sig
               else "another signal (a kill -9, a scheduler's) or os._exit")  # fmt: skip
        also = ""  # the host's kill: another cgroup's (or its own, had it moved since read)
        if row.oom_source and row.host_oom_kills:
            also = f"; the host counted {row.host_oom_kills}, in another cgroup"
        return f": not the OOM killer ({counter} counted no OOM kill as it ended{also}): {how}"
    if abrupt:
        return (": killed by a signal (SIGKILL, which the kernel's OOM killer sends when "
                "memory runs out) or os._exit")  # fmt: skip
    cause = SIGNAL_CAUSE.get(sig or 0, "")
    return f": {cause}" if cause else ""


def ended_row(snap: Snapshot, pid: int, host: str, by: float) -> ProcRow | None:
    """``pid``'s row (on ``host``, a collector's) where its end was seen by ``by`` (a hang's
    call: a rank that ended after it, by the timeout that ended the job, is not why the
    others waited), else None."""
    return next((p for p in snap.ended if p.pid == pid and p.ended_t is not None
                 and p.ended_t <= by and (not host or not p.host or p.host == host)),
                None)  # fmt: skip


def hang_called(h: HangRow) -> float:
    """When a collective's wait became a hang: its missing ranks' ends by then are why."""
    return h.t_created + h.threshold_s


def ended_short(snap: Snapshot, row: ProcRow) -> str:
    """``ended (SIGKILL)``, ``ended (OOM kill)``, ``ended``: a notice's words."""
    tag = end_tag(row, *ending(snap, row)[:2])
    return f"ended ({tag})" if tag else "ended"


def end_tag(row: ProcRow, code: int | None, sig: int | None) -> str:
    """A table's or a notice's word for an abnormal end ("" for a clean one): ``OOM kill``
    where a SIGKILL, or an end whose status its parent reaped first, came as an OOM kill was
    counted (:func:`cause_of` says which count), else ``SIGKILL``, ``exit 1``."""
    if (sig == 9 or (sig is None and code is None)) and row.oom_kills:
        return "OOM kill"
    return exit_tag(code, sig)


def how_ended(snap: Snapshot, row: ProcRow) -> str:
    """``killed by SIGKILL``, ``exited with code 1``, ``exited``; a training process's end
    with no status read and no last send from its hook, :data:`ABRUPT`; else ``ended``."""
    code, sig, _ = ending(snap, row)
    return exit_words(code, sig) or (ABRUPT if snap.cut(row.pid, row.host) else "ended")


# a training process that ended with no last send from its hook, its status unread (its
# parent reaped it first): :func:`cause_of` says what may have ended it
ABRUPT = "ended abruptly, with no last send from its hook"
