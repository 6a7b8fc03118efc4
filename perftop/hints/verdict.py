"""The whole-run verdict: every rule once over the whole run's figures, so a job too short
for the live engine's persistence (about 3 s and 3 evaluations) still gets its hints in the
end-of-run summary and in ``perftop report``.

The verdict is a pure function of the session's state, so the same recording always gives
the same verdict. Probe figures are read as run averages (``*_avg``), not the latest
sample: the last sample of a finished job is often taken while it shuts down.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TypeVar

from perftop.hints.engine import RULES, evaluate, order
from perftop.hints.hang import as_ran
from perftop.model.snapshot import Hint, ProcRow, Snapshot

T = TypeVar("T")


def whole_run_view(snap: Snapshot) -> Snapshot:
    """``snap`` with each probe's latest sample replaced by its run average (peak, for
    memory) where one exists, and the job's processes as they were while it ran."""
    h = snap.host
    host = replace(
        h,
        cpu_percent=_run(h.cpu_percent_avg, h.cpu_percent),
        per_core=h.per_core_avg or h.per_core,  # (a pinned job's cores: model/cores.py)
        iowait_percent=_run(h.iowait_percent_avg, h.iowait_percent),
        # (a finished job's last disk sample once read 100% busy moving no byte: io-bound)
        disk_busy_percent=_run(h.disk_busy_percent_avg, h.disk_busy_percent),
        disk_read_bps=_run(h.disk_read_bps_avg, h.disk_read_bps),
        disk_write_bps=_run(h.disk_write_bps_avg, h.disk_write_bps),
        # memory at its tightest: a finished job's workers have freed theirs by the end
        mem_available_bytes=_run(h.mem_available_bytes_min, h.mem_available_bytes),
        swap_used_bytes=_run(h.swap_used_bytes_max, h.swap_used_bytes),
    )
    # The run's processes as they ran: the trainers and each loader's latest workers (a
    # training loader's and an evaluation's) count as alive (a finished job's have
    # exited), at their run averages and peak memory; every other process of the job (a
    # launcher's, Ray's actors and daemons, a helper it started, an earlier epoch's
    # workers), alive or not, at its share of the run's CPU, which the job's cores count
    # (hints.cores.job_cores): they and the host's average are then of one span (Ray's env
    # runners, which had exited, were "other processes" holding the cores).
    current = {pid for ld in snap.loaders for _, pid in ld.workers}
    ran = {t.pid for t in snap.trainers} | current
    procs = tuple(
        replace(
            p,
            alive=p.alive or p.pid in ran,
            cpu_percent=_cpu(p, None if p.pid in ran else h.cpu_samples),
            uss_bytes=_run(p.uss_bytes_max, p.uss_bytes),
            core_wait_share=_run(p.core_wait_share_avg, p.core_wait_share),
        )
        for p in snap.processes
    )
    workers = tuple(replace(w, exited=False) if w.pid in current else w for w in snap.workers)
    gpus = tuple(
        replace(
            g,
            util_percent=_run(g.util_percent_avg, g.util_percent),
            mem_used_bytes=_run(g.mem_used_bytes_max, g.mem_used_bytes),
        )
        for g in snap.gpus
    )
    comm = replace(snap.comm, hangs=as_ran(snap.comm.hangs))  # every hang the run had
    # perftop's own CPU over the run too (its last reading is of the end's own work)
    m = snap.meta
    meta = replace(m, monitor_cpu_percent=_run(m.monitor_cpu_avg, m.monitor_cpu_percent))
    return replace(
        snap, meta=meta, host=host, processes=procs, gpus=gpus, workers=workers, comm=comm,
        hints=(),
    )  # fmt: skip


def _run(run: T | None, last: T | None) -> T | None:
    """A figure over the run (average, peak or least) where one was kept, else the last."""
    return run if run is not None else last


def _cpu(p: ProcRow, run: int | None) -> float | None:
    """A process's CPU % averaged over its samples, or over the run's ``run`` samples
    (where given: it ran for part of the run, or all of it); its latest where it has no
    average."""
    avg = p.cpu_percent_avg
    if avg is None:
        return p.cpu_percent
    if not run:
        return avg
    return avg * min(1.0, p.cpu_samples / run)


def verdict(snap: Snapshot) -> tuple[Hint, ...]:
    """Every rule once over the whole run (pass a ``window=None`` snapshot), on its
    entering bar: no hysteresis, nothing was shown before."""
    found, _ = evaluate(whole_run_view(snap), frozenset(), RULES)
    return order([replace(h, seen_live=False, whole_run=True) for h in found.values()])


def merge(live: tuple[Hint, ...], whole: tuple[Hint, ...]) -> tuple[Hint, ...]:
    """The hints shown live (their moments kept), each marked when the verdict agrees,
    then the verdict's own: one entry per id. One that held to the end and that the verdict
    gives says the verdict's figures, the whole run's (the report's): the live engine's last
    look was often taken as the job shut down (its workers gone from the evidence)."""
    by_id, shown = {h.id: h for h in whole}, {h.id for h in live}
    out = []
    for h in live:
        w = by_id.get(h.id)
        if w is not None and h.until_t is None:
            out.append(replace(w, since_t=h.since_t, host=h.host, seen_live=True))
        else:
            out.append(replace(h, seen_live=True, whole_run=w is not None))
    out += [h for h in whole if h.id not in shown]
    return order(out)
