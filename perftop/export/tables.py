"""A recording as CSV files, one per kind of event, for pandas and spreadsheets.

``steps.csv``, ``processes.csv`` (one row per process per sample, with its role, worker
index and host as the whole recording names them: a first pass reads the hellos and loader
reports, so a row sampled before its process said hello has its role too), ``host.csv``,
``gpus.csv`` (one row per device per sample), ``sync_sites.csv`` (the whole run's sites),
``between.csv`` (each interval outside the steps: an evaluation, a rollout, a checkpoint)
and ``collectives.csv`` (each rank's collectives: :mod:`perftop.export.coll_rows`).
Times are seconds since the session start; an empty cell is a figure that was not
available (N/A), never a zero. A text cell that a spreadsheet would read as a formula
(``=``, ``+``, ``-``, ``@``, a tab or a carriage return first: a process name, a
function or a file is the job's to choose) is written with a ``'`` before it.
"""

from __future__ import annotations

import contextlib
import csv
from pathlib import Path
from typing import Any

from perftop.events import (
    Between,
    CollBatch,
    GpuSample,
    Hello,
    HostSample,
    LoaderInfo,
    NodeScope,
    ProcSample,
    SessionStart,
    Step,
)
from perftop.events.probes import GPU_FIELDS, PROC_FIELDS
from perftop.export.coll_match import Groups
from perftop.export.coll_rows import COLL_COLUMNS, CollRows
from perftop.export.output import outputs
from perftop.model import Session
from perftop.model.roles import ranked
from perftop.recording import ReadStats, read_events
from perftop.replay.index import steps_reducer

STEP_COLUMNS = (
    "pid",
    "rank",
    "index",
    "t0_s",
    "t1_s",
    "duration_s",
    "data_s",
    "forward_other_s",
    "backward_s",
    "optimizer_s",
    "source",
)
BETWEEN_COLUMNS = ("pid", "rank", "kind", "t0_s", "t1_s", "length_s", "site", "forward_s")
# HostSample fields written as they are, in this order (the CSV's columns and its cells)
HOST_FIGURES = (
    "mem_total",
    "mem_used",
    "mem_available",
    "swap_total",
    "swap_used",
    "disk_read",
    "disk_write",
    "disk_busy_percent",
    "net_rx",
    "net_tx",
    "shm_used",
)
HOST_COLUMNS = (
    "t_s",
    "dt_s",
    "cpu_count",
    "cpu_percent",
    "iowait_percent",
    "load1",
    *HOST_FIGURES,
    "per_core",
)
SYNC_COLUMNS = (
    *("op", "file", "line", "function", "kind", "count", "per_step", "blocked_s"),
    *("lib_file", "lib_line", "lib_function", "package"),  # a sync made inside a library
)


def _cell(v: Any) -> Any:
    if v is None:
        return ""
    if isinstance(v, (tuple, list)):  # per-core figures; GPU processes as pid:mem:sm
        return " ".join(":".join(map(str, x)) if isinstance(x, tuple) else str(x) for x in v)
    return v


ROLE_COLUMNS = ("role", "worker_id", "host")  # appended after the probe's own columns
FORMULA_FIRST = ("=", "+", "-", "@", "\t", "\r")


def inert(v: Any) -> Any:
    """A text cell no spreadsheet runs: one starting as a formula gets a ``'`` first (the
    job's strings are anyone's; numbers, which may be negative, are written as they are)."""
    return "'" + v if isinstance(v, str) and v.startswith(FORMULA_FIRST) else v


class _Sheet:
    """A ``csv.writer`` whose text cells are :func:`inert`."""

    def __init__(self, f: Any) -> None:
        self._w = csv.writer(f)

    def writerow(self, row: Any) -> None:
        self._w.writerow([inert(v) for v in row])


def roles_by_process(
    path: str | Path, groups: Groups | None = None
) -> dict[tuple[str, int], tuple[str, int | None]]:
    """(node, pid) -> (role, worker index) from the hellos and loader reports; ``groups``,
    if given, also learns who entered each process group's collectives (one read of the
    recording for both)."""
    roles: dict[tuple[str, int], tuple[str, int | None]] = {}
    node = ""
    for ev in read_events(path, ReadStats()):
        if isinstance(ev, NodeScope):
            node = ev.node
        elif isinstance(ev, CollBatch):
            if groups is not None:
                groups.add(node, ev)
        elif isinstance(ev, Hello):
            if ev.worker_id is not None:
                roles[(node, ev.pid)] = ("worker", ev.worker_id)
            elif roles.get((node, ev.pid), ("main",))[0] != "worker":
                # a trainer's latest Hello: a rank greets again once its group is made
                roles[(node, ev.pid)] = ("rank" if ranked(ev.rank, ev.world_size) else "main", None)
        elif isinstance(ev, LoaderInfo):
            for worker_id, pid in ev.workers:
                roles[(node, pid)] = ("worker", worker_id)
    return roles


def export_csv(path: str | Path, out_dir: str | Path, stats: ReadStats) -> dict[str, int]:
    """Write the CSV files; returns the rows written per file."""
    out = Path(out_dir)
    made = not out.exists()
    out.mkdir(parents=True, exist_ok=True)
    try:
        return _write_csv(path, out, stats)
    except OSError:
        if made:  # a folder this export made, left empty by the removal of its files
            with contextlib.suppress(OSError):
                out.rmdir()
        raise


def _write_csv(path: str | Path, out: Path, stats: ReadStats) -> dict[str, int]:
    session = Session()  # for ranks and the whole-run sync sites
    start: float | None = None
    kinds = ("steps", "processes", "host", "gpus", "sync_sites", "between", "collectives")
    rows = dict.fromkeys(kinds, 0)
    with outputs([out / f"{k}.csv" for k in kinds]) as files:
        w = {k: _Sheet(f) for k, f in zip(kinds, files, strict=True)}
        w["steps"].writerow(STEP_COLUMNS)
        w["processes"].writerow(("t_s", "dt_s", *PROC_FIELDS, *ROLE_COLUMNS))
        groups = Groups()
        roles = roles_by_process(path, groups)
        node, local = "", ""
        w["host"].writerow(HOST_COLUMNS)
        w["gpus"].writerow(("t_s", *GPU_FIELDS))
        w["sync_sites"].writerow(SYNC_COLUMNS)
        w["between"].writerow(BETWEEN_COLUMNS)
        w["collectives"].writerow(COLL_COLUMNS)
        ranks: dict[int, int | None] = {}

        def rel(t: float) -> float:
            return round(t - (start or 0.0), 6)

        def rank(pid: int) -> int | None:
            if pid not in ranks:
                sr = steps_reducer(session)
                ranks[pid] = sr.rank_of(pid) if sr is not None else None
            return ranks[pid]

        colls = CollRows(w["collectives"].writerow, rel, rank, groups.sizes())
        for ev in read_events(path, stats):
            session.apply(ev)
            if isinstance(ev, CollBatch):
                colls.batch(node or local, ev)
            elif isinstance(ev, NodeScope):
                node = ev.node
            elif isinstance(ev, SessionStart) and start is None:
                start, local = ev.t, ev.host
            elif isinstance(ev, Between):
                fwd = ev.forward_s if ev.forward_s >= 0.0 else None  # not measured
                w["between"].writerow(
                    (ev.pid, _cell(rank(ev.pid)), ev.kind, rel(ev.t0), rel(ev.t0 + ev.length),
                     ev.length, ev.site, _cell(fwd))
                )  # fmt: skip
                rows["between"] += 1
            elif isinstance(ev, Step):
                rank(ev.pid)
                d = ev.t1 - ev.t0
                other = max(0.0, d - ev.data - ev.backward - ev.optimizer)
                w["steps"].writerow(
                    (
                        ev.pid,
                        _cell(ranks[ev.pid]),
                        ev.index,
                        rel(ev.t0),
                        rel(ev.t1),
                        d,
                        ev.data,
                        other,
                        ev.backward,
                        ev.optimizer,
                        ev.source,
                    )
                )
                rows["steps"] += 1
            elif isinstance(ev, ProcSample):
                for r in ev.rows:
                    cells = [_cell(r[i] if i < len(r) else None) for i in range(len(PROC_FIELDS))]
                    role, worker = roles.get((node, r[0]), ("other", None))
                    host = node or local
                    w["processes"].writerow((rel(ev.t), ev.dt, *cells, role, _cell(worker), host))
                    rows["processes"] += 1
            elif isinstance(ev, HostSample):
                w["host"].writerow(
                    (
                        rel(ev.t),
                        ev.dt,
                        ev.cpu_count,
                        _cell(ev.cpu_percent),
                        _cell(ev.iowait_percent),
                        _cell(ev.load[0] if ev.load else None),
                        *(_cell(getattr(ev, k)) for k in HOST_FIGURES),
                        _cell(ev.per_core),
                    )
                )
                rows["host"] += 1
            elif isinstance(ev, GpuSample):
                for dev in ev.devices:
                    cells = [
                        _cell(dev[i] if i < len(dev) else None) for i in range(len(GPU_FIELDS))
                    ]
                    w["gpus"].writerow((rel(ev.t), *cells))
                    rows["gpus"] += 1
        colls.finish()
        rows["collectives"] = colls.rows
        for s in session.snapshot(window=None).sync:
            w["sync_sites"].writerow(
                (
                    s.op,
                    s.file,
                    s.line,
                    s.function,
                    s.kind,
                    s.count,
                    round(s.per_step, 6),
                    _cell(s.blocked_s),
                    _cell(s.lib_file),
                    _cell(s.lib_line),
                    _cell(s.lib_function),
                    _cell(s.package),
                )
            )
            rows["sync_sites"] += 1
    return rows
