"""Where a process stood at a moment perftop looked into (a hung collective, a stalled
step), and whether it was held there: the one lookup behind the hint, the Ranks line, the
``k`` screen and the report, so that they name the same place."""

from __future__ import annotations

from collections.abc import Callable

from perftop.events.stacks import HELD_STATES, StackFrame
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
