"""The JSON report's processes, DataLoaders, host and GPUs: the figures the probes
sampled from outside the job (and the loaders its hook saw), apart from the steps and
ranks that :mod:`perftop.report.build` keys from the job's own events."""

from __future__ import annotations

from typing import Any

from perftop.fmt import cpu_list, rounded, signal_name
from perftop.model import Snapshot
from perftop.model.cores import allowed_cores
from perftop.model.snapshot import ProcessRole, ProcRow
from perftop.model.stands import abnormal_ends, end_words, ending


def process_json(snap: Snapshot, r: ProcessRole) -> dict[str, Any]:
    p = next((row for row in snap.processes if row.pid == r.pid and row.host == r.host), None)
    return {
        "pid": r.pid,
        "role": r.role,
        "rank": r.rank,
        "worker_id": r.worker_id,
        "loader_id": r.loader_id,
        "parent_pid": r.parent_pid,
        **_probe_figures(p),
        "host": r.host,
    }


PROC_KEYS = (
    "cpu_percent_avg",
    "cpu_percent_max",
    "rss_bytes_max",
    "uss_bytes_max",
    "pss_bytes_max",
    "uss_bytes_first",
    "uss_bytes_last",
    "io_read_bytes",
    "io_write_bytes",
    "core_wait_share_avg",
    "cpus",
    "cpu_quota",
)


def _probe_figures(p: ProcRow | None) -> dict[str, Any]:
    """The probe's whole-run figures of a process; all null when the probe never saw it."""
    out: dict[str, Any] = {k: getattr(p, k) if p is not None else None for k in PROC_KEYS}
    out["name"] = p.name if p is not None else ""
    out["cmdline"] = p.cmdline if p is not None else ""
    out["threads"] = p.threads if p is not None else None
    # when the probes first and last saw it: a pool made anew each epoch (proc_groups.py)
    out["first_seen_t"] = rounded(p.first_t, 3) if p is not None else None
    out["last_seen_t"] = rounded(p.last_t, 3) if p is not None else None
    # how it ended, seen as it ended (a pidfd): null while alive, where not seen, or where
    # its parent reaped it before its status was read
    out["ended_t"] = rounded(p.ended_t, 3) if p is not None else None
    out["exit_code"] = p.exit_code if p is not None else None
    sig = p.exit_signal if p is not None else None
    out["exit_signal"] = signal_name(sig) if sig is not None else None  # "SIGKILL"
    return out


def ends_json(snap: Snapshot) -> list[dict[str, Any]]:
    """The job's processes that ended by a signal or with an error, in the order they
    ended: the first is where a crash began (a rank the OOM killer took), the others
    followed it (the ranks its launcher stopped, their workers)."""
    ends = abnormal_ends(snap)
    how = {p.pid: ending(snap, p) for p in ends}
    return [
        {
            "pid": p.pid,
            "host": p.host,
            "ended_t": rounded(p.ended_t, 3),
            "exit_code": how[p.pid][0],
            "exit_signal": signal_name(sig) if (sig := how[p.pid][1]) is not None else None,
            # the OOM kills counted as it ended: 1 or more, the OOM killer's; by its memory
            # cgroup ("memory.events", "memory.oom_control": its own processes') or the host
            "oom_kills": p.oom_kills,
            "oom_counted_by": p.oom_counted_by,
            "words": end_words(snap, p, ends[0]),
        }
        for p in ends
    ]


def loader_json(ld: Any, remade_from: int | None = None) -> dict[str, Any]:
    """A loader's settings and workers; ``during``: the kind of interval outside the steps
    its first iterator started in (``eval``), None in the steps; ``remade_from``: the first
    loader of its run of loaders made anew alike (loader_runs.py), or None."""
    return {
        "pid": ld.pid,
        "loader_id": ld.loader_id,
        "dataset": ld.dataset,
        "num_workers": ld.num_workers,
        "batch_size": ld.batch_size,
        "pin_memory": ld.pin_memory,
        "prefetch_factor": ld.prefetch_factor,
        "persistent_workers": ld.persistent_workers,
        "workers": [{"worker_id": w, "pid": p} for w, p in ld.workers],
        "host": ld.host,
        "start_method": ld.start_method or None,
        "starts": len(ld.starts),
        "grad_enabled": ld.grad,
        "during": ld.during or None,
        "remade_from": remade_from,
    }


def host_json(snap: Snapshot) -> dict[str, Any]:
    h = snap.host
    jc = allowed_cores(snap)
    return {
        "cpu_count": h.cpu_count,
        # what the training processes may use, where less than the host (model/cores.py)
        "job_cpus": cpu_list(jc.cpus) if jc.cpus is not None else None,
        "job_cpu_quota": jc.quota,
        "cpu_percent_avg": h.cpu_percent_avg,
        "iowait_percent_avg": h.iowait_percent_avg,
        "memory_total_bytes": h.mem_total_bytes,
        "memory_used_bytes_max": h.memory_used_bytes_max,
        "swap_used_bytes": h.swap_used_bytes,  # the last sample's
        "swap_used_bytes_max": h.swap_used_bytes_max,
        "memory_available_bytes_min": h.mem_available_bytes_min,
        "disk_read_bytes": h.disk_read_bytes,
        "disk_write_bytes": h.disk_write_bytes,
        "disk_busy_percent_avg": h.disk_busy_percent_avg,  # the busiest disk's, each sample
    }


def gpus_json(snap: Snapshot) -> list[dict[str, Any]]:
    out = []
    for g in snap.gpus:
        entry: dict[str, Any] = {
            "index": g.index,
            "name": g.name,
            "uuid": g.uuid,
            "memory_total_bytes": g.mem_total_bytes,
            "power_limit_w": g.power_limit_w,
        }
        for name, avg, mx in g.stats:
            entry[f"{name}_avg"] = rounded(avg, 2)
            entry[f"{name}_max"] = mx
        entry["throttle"] = list(g.throttle)
        entry["processes"] = [
            {"pid": p.pid, "memory_bytes": p.mem_bytes, "sm_percent": p.sm_percent}
            for p in g.processes
        ]
        entry["host"] = g.host
        out.append(entry)
    return out
