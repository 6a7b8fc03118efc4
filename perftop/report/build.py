"""The JSON report of a session: a stable contract with users' scripts.

Keys named by the issues (``command``, ``steps.step_time_s.p50``, ...) never change
meaning; new keys may be added. Seconds are floats, bytes are ints, absent figures null.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from perftop.errors import RecordingError
from perftop.fmt import rounded
from perftop.hints.session import hinted_session
from perftop.model import Session, Snapshot
from perftop.model.fleet import FleetSession
from perftop.model.ranks import find_straggler, slowest
from perftop.model.snapshot import Hint, StepStats, signal_name
from perftop.model.trainers import one_after_another, rate_over_run, span
from perftop.recording import ReadStats, read_events
from perftop.report.captures import captures_json
from perftop.report.comm import comm_json, hangs_json, rank_comm
from perftop.report.loader_runs import runs
from perftop.report.probes_json import (
    ends_json,
    gpus_json,
    host_json,
    loader_json,
    process_json,
)
from perftop.report.stacks import stacks_json, stalls_json
from perftop.report.sync import sync_json

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
        "exit_signal": signal_name(m.exit_signal) if m.exit_signal else None,
        "ended": m.ended,
        "duration_s": rounded(m.elapsed_s),
        "record_path": m.record_path,
        "steps": {
            **_steps(snap.steps),
            "between_s": _between(snap),
            **_trainers(snap),
            "cut_short": list(cut_short(snap)),
            "cut_short_hosts": cut_short_hosts(snap),
        },
        "ranks": _ranks(snap),
        "comm": comm_json(snap),
        "hangs": hangs_json(snap),
        "processes": [process_json(snap, r) for r in snap.roles],
        "abnormal_ends": ends_json(snap),
        "loaders": _loaders(snap),
        "host": host_json(snap),
        "gpus": gpus_json(snap),
        "gpu_note": snap.gpu_note,
        "sync_events": sync_json(snap),
        "sync_between": sync_json(snap, between=True),
        "sync_watch": {
            "watched_steps": snap.sync_watch.watched,
            "paused": snap.sync_watch.paused or None,
            "passes_watched": snap.sync_watch.passes,
            "passes_run": snap.passes_run,
        },
        "hints": [_hint(h, m.start_t) for h in snap.hints],
        "stacks": stacks_json(snap),
        "stalls": stalls_json(snap),
        "captures": captures_json(snap),
        "dropped_events": m.dropped_events,
        "rejected_frames": m.rejected_frames,
        "monitor_dropped_events": m.monitor_dropped,
        "monitor_cpu_percent": m.monitor_cpu_avg,
        "monitor_rss_bytes": m.monitor_rss_bytes,
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


def _loaders(snap: Snapshot) -> list[dict[str, Any]]:
    run = runs(snap)
    return [loader_json(ld, run.get((ld.host, ld.pid, ld.loader_id))) for ld in snap.loaders]


def cut_short(snap: Snapshot) -> tuple[int, ...]:
    """Training processes that ended without their hook's last event (os._exit, a fatal
    signal): their last steps are missing. Said once the job ended."""
    return snap.unclosed if snap.meta.ended else ()


def cut_short_hosts(snap: Snapshot) -> list[str]:
    """The node of each of :func:`cut_short`, in its order ("" but on a collector)."""
    return [host for host, _pid in snap.unclosed_at] if snap.meta.ended else []


def cut_short_text(pids: Sequence[int], hosts: Sequence[str] = ()) -> str:
    """``pid 9113 ended without perftop's last send …``; ``pid 9113 on n2`` where a
    collector's nodes' pids may repeat."""
    on = [f" on {h}" if h else "" for h in hosts] if len(hosts) == len(pids) else [""] * len(pids)
    who = ", ".join(f"pid {p}{o}" for p, o in zip(pids, on, strict=True))
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
        "step_time_s": {"p50": rounded(s.p50), "p95": rounded(s.p95), "max": rounded(s.max)},
        "steps_per_s": rounded(s.steps_per_s, 3),
        "wall_steps_per_s": rounded(s.wall_steps_per_s, 3),
        "phases_s": {k: rounded(v) for k, v in s.phase_p50.items()},
        "data_wait_fraction": rounded(s.data_wait_fraction, 4),
        "data_wait_source": s.data_wait_source,
        "gpu_time_s": {"p50": rounded(s.gpu_p50)},
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
        "total_steps_per_s": rounded(rate_over_run(ts), 3),
        "one_after_another": one_after_another([span(t) for t in ts]),
    }


def _between(snap: Snapshot) -> dict[str, Any]:
    """Time outside training steps, by kind: ``{"eval": {"total_s": 1.2, "count": 3}}``;
    where passes a forward with grad off opened: ``site`` (the user's function that held
    the most of it), ``site_s``, and ``forward_s`` (time inside the model's forward
    calls) over ``measured_s`` of it."""
    out: dict[str, Any] = {}
    for b in snap.between:
        row: dict[str, Any] = {"total_s": rounded(b.total_s), "count": b.count}
        if b.site:
            row.update(site=b.site, site_s=rounded(b.site_s))
        if b.measured_s > 0:
            row.update(forward_s=rounded(b.forward_s), measured_s=rounded(b.measured_s))
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
        "step_time_p50_s": rounded(s.p50),
        "step_time_p95_s": rounded(s.p95),
        "data_wait_fraction": rounded(s.data_wait_fraction, 4),
        "data_wait_source": s.data_wait_source,
        "host": s.host,
        "data_wait_p50_s": rounded(s.phase_p50.get("data")),
        "backward_p50_s": rounded(s.phase_p50.get("backward")),
        "outside_backward_p50_s": rounded(s.own_p50),
        "gpu_time_p50_s": rounded(s.gpu_p50),
        "sync_events": s.sync_count,
        "slowest": slowest,
        "straggler": straggler,
    }


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
