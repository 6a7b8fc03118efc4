"""Without a TUI, what the TUI says in a notice as it happens, one line on stderr at once:
a stalled step (its stacks captured), a hung or desynchronized collective, a process of the
job killed by a signal or ended with an error (the first; then each rank's). A headless run
on a cluster node leaves them in the job's log when they happen, not only in the summary
at its end (a hang may never end; the NCCL watchdog speaks up 30 minutes later)."""

from __future__ import annotations

from collections.abc import Callable

from perftop.console import say
from perftop.model import Snapshot
from perftop.model.stands import abnormal_ends, end_words
from perftop.report.comm import hang_notice, new_stalls, stall_words

HEADLESS_SNAPSHOT_S = 1.0  # headless: snapshots at most this often (the probes' interval)


def snapshot_every(refresh_s: float, tui: bool) -> float:
    """How often the hub makes a snapshot: at the screen's refresh, or without a screen
    (the metrics, the stall and worker watches, these lines) once a second at most."""
    return refresh_s if tui else max(refresh_s, HEADLESS_SNAPSHOT_S)


class Notices:
    """A snapshot subscriber (the hub's thread): each new stall and hang said once."""

    def __init__(
        self, then: Callable[[Snapshot], object] | None = None, out: Callable[[str], None] = say
    ) -> None:
        self.then = then  # another subscriber (the metrics), called after
        self.out = out
        self.stalls: set[tuple[float, int]] = set()
        self.hangs: set[tuple[str, int, bool]] = set()
        self.ends: set[int] = set()

    def __call__(self, snap: Snapshot) -> None:
        for line in self.lines(snap):
            self.out(line)
        if self.then is not None:
            self.then(snap)

    def lines(self, snap: Snapshot) -> list[str]:
        out = []
        for s in new_stalls(snap, self.stalls):
            out.append(f"perftop: {stall_words(snap, s)}: stacks captured")
        for h in snap.comm.hangs:
            key = (h.pg, h.seq, h.desync)
            if key not in self.hangs:
                self.hangs.add(key)
                out.append(hang_notice(snap, h))
        ends = abnormal_ends(snap)
        for row in ends:
            if row.root or row.pid == snap.meta.job_pid:  # the job's own: its summary says it
                continue
            rank = snap.role_of(row.pid, row.host or None)
            if row.pid in self.ends or (
                row is not ends[0] and (rank is None or rank.role != "rank")
            ):
                continue
            self.ends.add(row.pid)
            out.append(f"perftop: {end_words(snap, row, ends[0])}")
        return out
