"""The human report, rendered from the JSON report so both always agree."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from perftop.fmt import NA, fraction, lines, seconds, table
from perftop.fmt import command as command_line
from perftop.model import Snapshot
from perftop.model.between import OVERLAPPED, pass_text
from perftop.model.notes import grouped, sources_text
from perftop.model.snapshot import BEFORE_FORWARD
from perftop.model.stands import abnormal_ends, cause_of, end_words
from perftop.model.steps import overall_differs
from perftop.model.trainers import whose
from perftop.report.build import cut_short, cut_short_hosts, cut_short_text
from perftop.report.captures import capture_lines
from perftop.report.comm import collective_lines, hang_lines, hang_notice, tail_words
from perftop.report.stacks import stack_lines
from perftop.report.sync import no_between_lines, no_sync_lines, sync_lines
from perftop.report.text_probes import gpu_lines, host_lines, loaders_table, processes_table


def render(r: dict[str, Any]) -> str:
    out: list[str] = []
    cmd = command_line(r["command"])
    code = r["exit_code"]
    if code is not None:
        state = f"exit code {code}"
        if r.get("exit_signal"):  # (a report of an older perftop has none)
            state = f"killed by {r['exit_signal']} ({state})"
    elif r.get("ended"):
        state = "ended, exit code unknown (recorded in the background)"
    elif r.get("slice"):
        state = "the run went on after this slice"
    else:
        state = "no end recorded (still running, perftop was killed, or the recording stopped early: a full disk)"
    out.append(f"perftop report: {cmd}")
    out.append(f"  {state}, ran {seconds(r['duration_s'])} on {r['hostname'] or NA}")
    own = monitor_text(r.get("monitor_cpu_percent"), r.get("monitor_rss_bytes"))
    if own:
        out.append(f"  {own}")
    out.extend(hint_lines(r.get("hints") or [], sliced=bool(r.get("slice"))))
    s = r["steps"]
    out.append("")
    out.append("Steps")
    if not s["count"]:
        out.append("  no training steps seen (no optimizer step, backward() or DataLoader batch)")
    else:
        st = s["step_time_s"]
        sps = s["steps_per_s"]
        of = ""
        if s.get("trainers"):
            tps = s["total_steps_per_s"]
            how = "one after another" if s.get("one_after_another") else "together"
            out.append(
                f"  {s['total_count']} steps in {s['trainers']} trainers without ranks, "
                f"{f'{tps:.3f}' if tps is not None else NA} steps/s {how} (each under Ranks)"
            )
            of = whose(s["pid"], [rk["pid"] for rk in r["ranks"] if rk["steps"]]) + ": "
        wall = s.get("wall_steps_per_s")  # absent in a report of an older perftop
        shown = overall_differs(sps, wall) and not s.get("trainers")
        overall = f" ({wall:.3f}/s overall)" if shown else ""
        out.append(
            f"  {of}{s['count']} step{'' if s['count'] == 1 else 's'}, "
            f"{f'{sps:.3f}' if sps is not None else NA} steps/s"
            f"{overall}, "
            f"step time p50 {seconds(st['p50'])}  p95 {seconds(st['p95'])}  "
            f"max {seconds(st['max'])}"
        )
        out.append(f"  {data_wait_text(s['data_wait_fraction'], s.get('data_wait_source'))}")
        if s.get("cut_short"):
            out.append(f"  {cut_short_text(s['cut_short'], s.get('cut_short_hosts') or ())}")
        phases = s["phases_s"]
        if phases:
            out.append(table(["phase (median)", *phases], [["", *map(seconds, phases.values())]]))
            if "backward" not in phases:
                out.append("  no backward() and no torch.optim step: each step is a DataLoader "
                           "batch (an inference loop, or an update perftop does not see)")  # fmt: skip
            elif "optimizer" not in phases:
                out.append("  no torch.optim step: the update (a hand-written one, Keras's) is in "
                           "forward/other")  # fmt: skip
        if s["gpu_time_s"]["p50"] is not None:
            out.append(f"  GPU time per step p50 {seconds(s['gpu_time_s']['p50'])}")
    between = dict(s.get("between_s") or {})
    overlapped = between.pop(OVERLAPPED, None)  # a save on another thread: the steps went on
    if between:
        parts = [f"{k} {seconds(v['total_s'])} ({v['count']}×)" for k, v in between.items()]
        out.append(f"  between steps (not in any step): {', '.join(parts)}")
        for k, v in between.items():
            if v.get("site"):
                out.append(f"    {k}: {pass_text(v, k)}")
    if overlapped is not None:
        out.append(
            f"  checkpoints on another thread, overlapping steps: "
            f"{seconds(overlapped['total_s'])} ({overlapped['count']}×)"
        )
    if len(r["ranks"]) > 1:
        out.append("")
        out.append("Ranks")
        out.append(
            table(
                [
                    "rank",
                    "host",
                    "pid",
                    "steps",
                    "p50",
                    "data wait",
                    "own work",
                    "backward",
                    "comm wait",
                    "",
                ],  # fmt: skip
                [
                    [
                        _s(x["rank"]),
                        x.get("host") or "-",
                        str(x["pid"]),
                        str(x["steps"]),
                        seconds(x["step_time_p50_s"]),
                        fraction(x["data_wait_fraction"]),
                        seconds(x.get("outside_backward_p50_s")),
                        seconds(x.get("backward_p50_s")),
                        seconds(x.get("comm_wait_s")),
                        "straggler"
                        if x.get("straggler")
                        else "slowest"
                        if x.get("slowest")
                        else "",
                    ]
                    for x in r["ranks"]
                ],
            )
        )
        if any(x.get("data_wait_source") == "before_forward" for x in r["ranks"]):
            out.append(f"  data wait: {BEFORE_FORWARD}")
    out.extend(collective_lines(r))
    if r.get("nodes"):
        out.append("")
        out.append("Nodes")
        out.append(
            table(
                ["node", "state", "events", "dropped"],
                [
                    [n["name"], n["state"], str(n["events"]), str(n["dropped_events"])]
                    for n in r["nodes"]
                ],
            )
        )
    if r["loaders"]:
        out.append("")
        out.append("DataLoaders")
        out.append(loaders_table(r["loaders"]))
    if r["processes"]:
        out.append("")
        out.append("Processes")
        out.append(processes_table(r["processes"], r["loaders"]))
    ends = r.get("abnormal_ends") or []
    if ends:
        out.append("")
        out.append("Ended abnormally (in the order they ended: the first is where it began)")
        out.extend(f"  {e['words']}" for e in ends)
    out.extend(host_lines(r.get("host") or {}))
    out.extend(gpu_lines(r.get("gpus") or [], r.get("gpu_note", "")))
    out.extend(sync_lines(r["sync_events"]) or no_sync_lines(r.get("sync_watch") or {}))
    out.extend(sync_lines(r.get("sync_between") or [], between=True) or no_between_lines(r))
    out.extend(hang_lines(r))
    out.extend(stack_lines(r))
    out.extend(capture_lines(r))
    out.extend(_footer(r))
    return lines(out) + "\n"  # each a line: a job's names hold no line of their own


def hint_lines(hints: list[dict[str, Any]], sliced: bool = False) -> list[str]:
    """What slowed the job, most estimated gain first: evidence, then what to try. In a
    slice, every rule's verdict is over the slice's figures, and says so."""
    if not hints:
        return []
    out = ["", "Hints (what slows this job, most at stake first)"]
    scope = "slice" if sliced else "run"
    for h in hints:
        when = _when(h, scope)
        out.append(f"  [{h['severity']}] {h['title']}{when}")
        if h.get("est_gain_text"):
            out.append(f"      at stake: {h['est_gain_text']}")
        out.extend(f"      - {e}" for e in h["evidence"])
        out.extend(f"      try: {a}" for a in h["advice"])
    return out


def _when(h: dict[str, Any], scope: str) -> str:
    """Where a hint comes from: shown live (to the end, or earlier) and/or the verdict of
    the run or the slice."""
    verdict = "the slice's verdict" if scope == "slice" else "whole-run verdict"
    live = h.get("seen_live", True)
    whole = verdict if h.get("whole_run") else ""
    if not live:
        return f"  [{verdict}; not shown live]"
    seen = "seen live" if h.get("active", True) else f"seen live earlier in the {scope}"
    return f"  [{seen}" + (f"; {whole}]" if whole else "]")


def data_wait_text(share: float | None, source: str | None) -> str:
    """The data wait's share, and where it was read when that was not at the loop's
    DataLoader fetches: behind a feeder it is the time off the CPU before the forwards,
    which holds the loop's own sleeps and blocking writes too (the Steps panel says
    "before forward")."""
    where = f" ({BEFORE_FORWARD})" if source == "before_forward" else ""
    return f"data wait {fraction(share)} of step time{where}"


def monitor_text(cpu: float | None, rss: int | None) -> str:
    """perftop's own cost over the run (the monitor's, the TUI's with it): the mean of its
    once-a-second readings of its CPU, and its last resident size; "" in a report of a
    recording from before perftop said them."""
    if cpu is None:
        return ""
    size = f", {rss / 2**20:.0f} MiB resident" if rss else ""
    return f"perftop itself: {cpu:.1f}% of one core on average{size}"


def _footer(r: dict[str, Any]) -> list[str]:
    out: list[str] = []
    if r["dropped_events"]:
        out.append(f"  {r['dropped_events']} events dropped by the hook (monitor too slow or away)")
    if r.get("monitor_dropped_events"):
        out.append(f"  {r['monitor_dropped_events']} events dropped by perftop (it fell behind)")
    if r["rejected_frames"]:
        out.append(f"  {r['rejected_frames']} malformed frames rejected")
    notes = grouped((n["level"], n["source"], n["text"]) for n in r["notes"])
    for level, text, sources in notes:  # one line for a note each rank said alike
        said = f"  (from {sources_text(sources)})" if len(sources) > 1 else ""
        out.append(f"  {level}: {text}{said}")
    return (["", "Notes", *out]) if out else []


def summary(snap: Snapshot, record: Path | None, record_error: str | None = None) -> str:
    """The few lines `perftop run --headless` prints when the job ends; ``record_error``:
    why the recording stopped early (said when it happened: here only where it ends)."""
    s = snap.steps
    ends = abnormal_ends(snap)
    top = next((p for p in ends if p.pid == snap.meta.job_pid), None)
    # the job's own process killed by a signal: what most likely sent it (the OOM killer)
    why = cause_of(snap, top) if top is not None and snap.meta.exit_signal else ""
    said = ["", f"perftop: {snap.meta.state}, {seconds(snap.meta.elapsed_s)}{why}"]
    trainers = snap.independent_trainers()
    if trainers:
        counts = " + ".join(str(t.count) for t in trainers)
        said.append(
            f"perftop: {sum(t.count for t in trainers)} steps in {len(trainers)} trainers "
            f"({counts})"
        )
    if s.count:
        of = f" ({whose(s.pid, [t.pid for t in trainers])})" if trainers else ""
        said.append(
            f"perftop: {s.count} steps{of}, p50 {seconds(s.p50)}, p95 {seconds(s.p95)}, "
            f"{data_wait_text(s.data_wait_fraction, s.data_wait_source)}"
        )
    elif snap.meta.observer:
        said.append("perftop: observer mode (no hook): no steps, see the stack samples")
    else:
        said.append("perftop: no training steps seen")
    # a process of the job with no hook, and why (its steps are missing): at most three
    hookless = [n for n in snap.notes if n.source == "hook" and n.level == "warning"]
    said += [f"perftop: warning: {n.text}" for n in hookless[:3]]
    if len(hookless) > 3:
        said.append(f"perftop: {len(hookless) - 3} more warnings: perftop report {record or ''}")
    short = cut_short(snap)
    if s.count and short:
        said.append(f"perftop: {cut_short_text(short, cut_short_hosts(snap))}")
    if snap.meta.dropped_events:
        said.append(f"perftop: {snap.meta.dropped_events} events dropped")
    said += [hang_notice(snap, h) for h in snap.comm.hangs]
    others = [p for p in ends if p is not top]
    if others:
        more = f" ({len(others) - 1} more after it: perftop report)" if len(others) > 1 else ""
        said.append(f"perftop: {end_words(snap, others[0], ends[0])}{more}")
    said += [f"perftop: {w}" for w in tail_words(snap).values()]
    for h in snap.hints:
        src = "" if h.seen_live else " (whole-run verdict)"
        said.append(f"perftop: hint [{h.severity}] {h.title}{src}")
    if record is not None and record_error is not None:
        said.append(
            f"perftop: recorded to {record} until it stopped ({record_error})  "
            f"(perftop report {record})"
        )
    elif record is not None:
        said.append(f"perftop: recorded to {record}  (perftop report {record})")
    return lines(said)


def _s(x: Any) -> str:
    return "-" if x is None else str(x)
