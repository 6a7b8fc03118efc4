"""The JSON report of a session: a stable contract with users' scripts.

Keys named by the issues (``command``, ``steps.step_time_s.p50``, ...) never change
meaning; new keys may be added. Seconds are floats, bytes are ints, absent figures null.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from perftop.errors import RecordingError
from perftop.hints.session import hinted_session
from perftop.model import Session, Snapshot
from perftop.model.fleet import FleetSession
from perftop.model.ranks import find_straggler, slowest
from perftop.model.snapshot import Hint, ProcessRole, ProcRow, StepStats
from perftop.model.trainers import one_after_another, rate_over_run, span
from perftop.recording import ReadStats, read_events
from perftop.report.captures import captures_json
from perftop.report.comm import comm_json, hangs_json, rank_comm
from perftop.report.stacks import stacks_json, stalls_json

REPORT_VERSION = 1


def session_from_file(path: str, stats: ReadStats | None = None) -> Session | FleetSession:
    """A session replayed from a recording: a plain one for a local run's, one per node
    for a collector's; a recording with no events is an error."""
    stats = stats if stats is not None else ReadStats()
    session = FleetSession(hinted_session)
    session.apply_all(read_events(path, stats, batch=True))
    if stats.events == 0:
        why = f" ({stats.warnings[0]})" if stats.warnings else ""
        raise RecordingError(f"{path}: no events in this recording{why}")
    return session if session.nodes else session.local


def build_report(snap: Snapshot, stats: ReadStats | None = None) -> dict[str, Any]:
    """Whole-run figures: pass a snapshot taken with ``window=None``."""
    m = snap.meta
    return {
        "report_version": REPORT_VERSION,
        "perftop_version": m.perftop_version,
        "command": list(m.command),
        "cwd": m.cwd,
        "hostname": m.host,
        "start_t": m.start_t,
        "exit_code": m.exit_code,
        "ended": m.ended,
        "duration_s": _round(m.elapsed_s),
        "record_path": m.record_path,
        "steps": {
            **_steps(snap.steps),
            "between_s": _between(snap),
            **_trainers(snap),
            "cut_short": list(cut_short(snap)),
        },
        "ranks": _ranks(snap),
        "comm": comm_json(snap),
        "hangs": hangs_json(snap),
        "processes": [_process(snap, r) for r in snap.roles],
        "loaders": [_loader(ld) for ld in snap.loaders],
        "host": _host(snap),
        "gpus": _gpus(snap),
        "gpu_note": snap.gpu_note,
        "sync_events": _sync(snap),
        "sync_between": _sync(snap, between=True),
        "sync_watch": {
            "watched_steps": snap.sync_watch.watched,
            "paused": snap.sync_watch.paused or None,
        },
        "hints": [_hint(h, m.start_t) for h in snap.hints],
        "stacks": stacks_json(snap),
        "stalls": stalls_json(snap),
        "captures": captures_json(snap),
        "dropped_events": m.dropped_events,
        "rejected_frames": m.rejected_frames,
        "monitor_dropped_events": m.monitor_dropped,
        "observer": m.observer,
        "events": snap.events,
        "notes": [{"level": n.level, "source": n.source, "text": n.text} for n in snap.notes],
        "warnings": list(stats.warnings) if stats is not None else [],
        "nodes": [
            {
                "name": n.name,
                "state": n.state,
                "connected": n.connected,
                "events": n.events,
                "dropped_events": n.dropped_events,
            }
            for n in snap.nodes
        ],
    }


def _round(x: float | None, nd: int = 6) -> float | None:
    return None if x is None else round(x, nd)


def cut_short(snap: Snapshot) -> tuple[int, ...]:
    """Training processes that ended without their hook's last event (os._exit, a fatal
    signal): their last steps are missing. Said once the job ended."""
    return snap.unclosed if snap.meta.ended else ()


def cut_short_text(pids: Sequence[int]) -> str:
    who = ", ".join(f"pid {p}" for p in pids)
    its = "its" if len(pids) == 1 else "their"
    return (
        f"{who} ended without perftop's last send (os._exit, or a signal that killed it): "
        f"{its} last steps, up to the quarter second before, are missing from these figures"
    )


def _steps(s: StepStats) -> dict[str, Any]:
    return {
        "count": s.count,
        "pid": s.pid,
        "rank": s.rank,
        "step_time_s": {"p50": _round(s.p50), "p95": _round(s.p95), "max": _round(s.max)},
        "steps_per_s": _round(s.steps_per_s, 3),
        "phases_s": {k: _round(v) for k, v in s.phase_p50.items()},
        "data_wait_fraction": _round(s.data_wait_fraction, 4),
        "data_wait_source": s.data_wait_source,
        "gpu_time_s": {"p50": _round(s.gpu_p50)},
    }


def _trainers(snap: Snapshot) -> dict[str, Any]:
    """Several trainers without ranks: the job's total over all of them, beside the
    primary one's figures (``count`` and the rest stay that trainer's: the first, or
    where they trained one after another, the last)."""
    ts = snap.independent_trainers()
    if not ts:
        return {}
    return {
        "trainers": len(ts),
        "total_count": sum(t.count for t in ts),
        "total_steps_per_s": _round(rate_over_run(ts), 3),
        "one_after_another": one_after_another([span(t) for t in ts]),
    }


def _between(snap: Snapshot) -> dict[str, Any]:
    """Time outside training steps, by kind: ``{"eval": {"total_s": 1.2, "count": 3}}``;
    where passes a forward with grad off opened: ``site`` (the user's function that held
    the most of it), ``site_s``, and ``forward_s`` (time inside the model's forward
    calls) over ``measured_s`` of it."""
    out: dict[str, Any] = {}
    for b in snap.between:
        row: dict[str, Any] = {"total_s": _round(b.total_s), "count": b.count}
        if b.site:
            row.update(site=b.site, site_s=_round(b.site_s))
        if b.measured_s > 0:
            row.update(forward_s=_round(b.forward_s), measured_s=_round(b.measured_s))
        out[b.kind] = row
    return out


def _ranks(snap: Snapshot) -> list[dict[str, Any]]:
    ranks = snap.ranks
    slow = slowest(ranks)
    strag = find_straggler(ranks)
    out = []
    for r in ranks:
        comm = rank_comm(snap, r.pid, r.host)
        own = strag is not None and r is slow
        out.append({**_rank(r, r is slow, own or comm["comm_straggler"]), **comm})
    return out


def _rank(s: StepStats, slowest: bool = False, straggler: bool = False) -> dict[str, Any]:
    return {
        "rank": s.rank,
        "pid": s.pid,
        "steps": s.count,
        "step_time_p50_s": _round(s.p50),
        "step_time_p95_s": _round(s.p95),
        "data_wait_fraction": _round(s.data_wait_fraction, 4),
        "host": s.host,
        "data_wait_p50_s": _round(s.phase_p50.get("data")),
        "backward_p50_s": _round(s.phase_p50.get("backward")),
        "outside_backward_p50_s": _round(s.own_p50),
        "gpu_time_p50_s": _round(s.gpu_p50),
        "sync_events": s.sync_count,
        "slowest": slowest,
        "straggler": straggler,
    }


def _process(snap: Snapshot, r: ProcessRole) -> dict[str, Any]:
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
)


def _probe_figures(p: ProcRow | None) -> dict[str, Any]:
    """The probe's whole-run figures of a process; all null when the probe never saw it."""
    out: dict[str, Any] = {k: getattr(p, k) if p is not None else None for k in PROC_KEYS}
    out["name"] = p.name if p is not None else ""
    out["cmdline"] = p.cmdline if p is not None else ""
    out["threads"] = p.threads if p is not None else None
    return out


def _loader(ld: Any) -> dict[str, Any]:
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
    }


def _host(snap: Snapshot) -> dict[str, Any]:
    h = snap.host
    return {
        "cpu_count": h.cpu_count,
        "cpu_percent_avg": h.cpu_percent_avg,
        "iowait_percent_avg": h.iowait_percent_avg,
        "memory_total_bytes": h.mem_total_bytes,
        "memory_used_bytes_max": h.memory_used_bytes_max,
        "swap_used_bytes": h.swap_used_bytes,
        "disk_read_bytes": h.disk_read_bytes,
        "disk_write_bytes": h.disk_write_bytes,
    }


def _gpus(snap: Snapshot) -> list[dict[str, Any]]:
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
            entry[f"{name}_avg"] = _round(avg, 2)
            entry[f"{name}_max"] = mx
        entry["throttle"] = list(g.throttle)
        entry["processes"] = [
            {"pid": p.pid, "memory_bytes": p.mem_bytes, "sm_percent": p.sm_percent}
            for p in g.processes
        ]
        entry["host"] = g.host
        out.append(entry)
    return out


def _hint(h: Hint, start_t: float | None) -> dict[str, Any]:
    """One hint of the run (most estimated gain first): ``seen_live`` when the live engine
    showed it (``since_s``/``until_s`` its moments), ``whole_run`` when the whole-run
    verdict gives it; ``active`` says whether it was shown live when the recording ended."""

    def since_start(t: float | None) -> float | None:
        return None if t is None or start_t is None else round(t - start_t, 3)

    return {
        "id": h.id,
        "severity": h.severity,
        "title": h.title,
        "evidence": list(h.evidence),
        "advice": list(h.advice),
        "est_gain": h.est_gain,
        "est_gain_text": h.est_gain_text,
        "panel": h.panel,
        "active": h.seen_live and h.until_t is None,
        "since_s": since_start(h.since_t),
        "until_s": since_start(h.until_t),
        "seen_live": h.seen_live,
        "whole_run": h.whole_run,
        "source": source(h),
    }


def source(h: Hint) -> str:
    """Where a hint comes from: ``live``, ``whole-run`` or ``live+whole-run``."""
    return (
        "live+whole-run" if h.seen_live and h.whole_run else "live" if h.seen_live else "whole-run"
    )


def _sync(snap: Snapshot, between: bool = False) -> list[dict[str, Any]]:
    """One entry per site, most costly first; ``per_step`` over the steps watched
    (weighed by the chance each had of being watched), ``watched_steps`` it rests on,
    ``per_step_error`` its standard error (0 in the exact mode; for a per-step site, at
    least what its drawn steps can tell; null: not sampled), ``seen_steps`` the watched
    steps the site was seen in, ``every_step`` whether that is every one (drawn ones
    included: a per-step site, ``per_step`` its count a step), ``exact`` whether every
    step was watched (``PERFTOP_SYNC=all``);
    ``blocked_s`` per watched step, measured on an accelerator only (else null). With
    ``between``: the syncs made outside training steps, ``per_pass`` (and ``passes``)
    instead of ``per_step``, ``blocked_s`` per pass. ``callers``: a library site's user lines
    (``file``, ``line``, ``function``, ``count``), the most frequent first (``file`` and
    ``line`` are that one's); its rate is theirs summed."""
    rows = snap.sync_between if between else snap.sync
    return [
        {
            "op": s.op,
            "file": s.file,
            "line": s.line,
            "function": s.function,
            "kind": s.kind,
            "count": s.count,
            **(
                {"per_pass": _round(s.per_pass, 4), "passes": s.passes}
                if between
                else {"per_step": _round(s.per_step, 4)}
            ),
            **(
                {}
                if between
                else {
                    "watched_steps": s.watched,
                    "per_step_error": _round(s.error, 4),
                    "seen_steps": s.seen,
                    "every_step": s.every_step,
                    "exact": s.exact,
                }
            ),
            "blocked_s": _round(s.blocked_s),
            "last_step": s.last_step,
            "host": s.host,
            "lib_file": s.lib_file,
            "lib_line": s.lib_line,
            "lib_function": s.lib_function,
            "package": s.package,
            "callers": [
                {"file": f, "line": n, "function": fn, "count": c} for f, n, fn, c in s.callers
            ],
        }
        for s in rows
    ]
