"""``io-bound``: the workers wait for storage. A rule of its own beside ``input-bound``
(:mod:`perftop.hints.inputs`): it fires on the host's and the loader's reads, not on how
the workers make batches, and names the storage, not the loader's settings."""

from __future__ import annotations

from perftop.hints.base import Loop, fraction, loop, nbytes, threshold
from perftop.model.snapshot import Hint, ProcRow, Snapshot

IOWAIT_ENTER, IOWAIT_STAY = 20.0, 10.0
DISK_BUSY = 60.0
WORKER_READ_BPS = 20 * 2**20


def loader_reads(snap: Snapshot, lp: Loop) -> float:
    """Bytes a second the input pipeline reads from storage, after start-up: its workers'
    reads once each has made a batch, or (no workers) the training process's, which then
    fetches the batches itself; only over probe intervals that began within the steps the
    data wait is measured on. A start-up's reads (importing torch) and the main process's
    reads beside its workers (checkpoints, logs) are not the loader's. Over a whole run (the
    verdict), each process's reads from its first sample in that span to its last: a short
    job's workers had exited, their last interval's rate gone with them."""
    since = lp.rows[0].t0
    if lp.workers:
        start = {w.pid: max(since, w.ready_t) for w in lp.workers if w.ready_t is not None}
    elif lp.loader is not None and lp.loader.num_workers == 0:
        start = {lp.pid: since}
    else:
        return 0.0
    return sum(_reads(p, start[p.pid]) for p in snap.processes if p.pid in start)


def _reads(p: ProcRow, since: float) -> float:
    """``p``'s bytes read a second over probe intervals that began at ``since`` or later."""
    marks = p.io_read_marks
    if not marks:  # a live snapshot: its last interval's rate
        ok = p.io_since_t is not None and p.io_since_t >= since
        return (p.io_read_bps or 0.0) if ok else 0.0
    t_last, last = marks[-1]
    t0, first = next(((t, n) for t, n in marks if t >= since), marks[-1])
    return (last - first) / (t_last - t0) if t_last > t0 else 0.0


def io_bound(snap: Snapshot, active: frozenset[str]) -> list[Hint]:
    lp = loop(snap)
    if lp is None or lp.data_share < threshold("io-bound", active, 0.15, 0.10):
        return []
    h = snap.host
    ev: list[str] = []
    iowait = h.iowait_percent
    if iowait is not None and iowait >= threshold("io-bound", active, IOWAIT_ENTER, IOWAIT_STAY):
        ev.append(f"the host CPUs wait on IO {iowait:.0f}% of the time (iowait)")
    moved = (h.disk_read_bps or 0.0) + (h.disk_write_bps or 0.0)
    if h.disk_busy_percent is not None and h.disk_busy_percent >= DISK_BUSY and moved > 0:
        wrote = f", writing {nbytes(h.disk_write_bps)}/s" if h.disk_write_bps else ""
        ev.append(
            f"the disks are {h.disk_busy_percent:.0f}% busy, reading {nbytes(h.disk_read_bps)}/s"
            + wrote
        )
    reads = loader_reads(snap, lp)
    if reads >= WORKER_READ_BPS:
        ev.append(f"the loader reads {nbytes(reads)}/s from storage")
    if not ev:
        return []
    if lp.workers_cpu is not None:
        ev.append(
            f"the workers spend {fraction(1 - lp.workers_cpu)} of each batch off the CPU, waiting"
        )
    ev.insert(0, f"data wait is {fraction(lp.data_share)} of step time")
    share = lp.data_share
    return [
        Hint(
            id="io-bound",
            severity="high" if share >= 0.5 else "medium",
            title="IO-bound: reading the data from storage holds up the input pipeline",
            evidence=tuple(ev),
            advice=(
                "Keep the data in RAM or on a local SSD, and store it preprocessed (decoded "
                "arrays, not files to decode every epoch).",
                "Read fewer, bigger files (shards) instead of one small file per sample.",
                "More workers or a higher prefetch_factor keep more reads in flight.",
            ),
            est_gain=round(share, 4),
            est_gain_text=f"up to {fraction(share)} of step time (the data wait)",
            panel="host",
        )
    ]
