"""Two recordings side by side: did a change help?

Each figure comes from the whole-run snapshot of each recording (the report's figures),
with its direction (lower or higher is better) so the table can say "better" or "worse";
a change under ``SAME_WITHIN`` (relative) is "same". Figures absent in either run are
shown as N/A and judged on neither side.
"""

from __future__ import annotations

from typing import Any

from perftop.fmt import NA, lines, table
from perftop.model import Session, Snapshot
from perftop.model.fleet import FleetSession
from perftop.model.step_stats import step_stats
from perftop.replay.index import primary_pid, steps_reducer

SAME_WITHIN = 0.05


def between_steps_s(session: Session | FleetSession) -> float | None:
    """Time the primary process spent outside its steps, from its first step's start to
    its last step's end (evaluation, checkpoints, logging between steps)."""
    pid, sr = primary_pid(session), steps_reducer(session)
    if pid is None or sr is None:
        return None
    s = sr.series[pid]
    if s.first_t0 is None or s.last_t1 is None:
        return None
    return max(0.0, (s.last_t1 - s.first_t0) - step_stats(s, None, None).step_sum_s)


def figures(snap: Snapshot, report: dict[str, Any], between_s: float | None) -> dict[str, Any]:
    """The compared figures of one run: name -> (value, lower_is_better, unit)."""
    st = report["steps"]
    f: dict[str, Any] = {
        "steps": (st["count"], None, "n"),
        "steps_per_s": (st["steps_per_s"], False, "/s"),
        "step_time_p50_s": (st["step_time_s"]["p50"], True, "s"),
        "step_time_p95_s": (st["step_time_s"]["p95"], True, "s"),
        "data_wait_fraction": (st["data_wait_fraction"], True, "%"),
    }
    for phase, v in st["phases_s"].items():
        f[f"phase_{phase}_p50_s"] = (v, True, "s")
    f["between_steps_s"] = (between_s, True, "s")
    for b in snap.between:
        f[f"between_{b.kind}_s"] = (b.total_s, True, "s")
    workers = [p for p in report["processes"] if p["role"] == "worker"]
    cpu = [p["cpu_percent_avg"] for p in workers if p.get("cpu_percent_avg") is not None]
    f["workers"] = (len(workers), None, "n")
    f["worker_cpu_percent_avg"] = (sum(cpu) / len(cpu) if cpu else None, None, "%cpu")
    for kind in ("sync", "potential"):
        n = sum(e["count"] for e in report["sync_events"] if e["kind"] == kind)
        # none watched (torch.compile stopped the detector first): not measured, not 0
        looked = kind == "sync" or snap.sync_watch.watched
        f[f"{kind}_count"] = (n if looked else None, True, "n")
    waits = [r["comm_wait_s"] for r in report.get("ranks", []) if r.get("comm_wait_s") is not None]
    if waits:  # a distributed job: its ranks, and the wait of the rank that waits most
        f["ranks"] = (len(report["ranks"]), None, "n")
        f["comm_wait_s"] = (max(waits), True, "s")
    f["duration_s"] = (report["duration_s"], None, "s")
    return f


def compare(a: dict[str, Any], b: dict[str, Any], hints_a: set[str], hints_b: set[str]) -> dict:
    """The JSON diff of two figure sets (see :func:`figures`)."""
    rows = []
    for name in list(a) + [k for k in b if k not in a]:
        va, lower, unit = a.get(name, (None, None, ""))
        vb, lower_b, unit_b = b.get(name, (None, None, ""))
        lower = lower if lower is not None else lower_b
        change = ratio = None
        verdict = "n/a" if va is None or vb is None else "same"
        if va is not None and vb is not None:
            change = vb - va
            ratio = (vb / va) if va else None
            rel = abs(change) / abs(va) if va else (0.0 if change == 0 else 1.0)
            if lower is not None and rel > SAME_WITHIN:
                verdict = "better" if (change < 0) == lower else "worse"
            elif lower is None:
                verdict = "changed" if rel > SAME_WITHIN else "same"
        rows.append(
            {
                "name": name,
                "a": va,
                "b": vb,
                "unit": unit or unit_b,
                "change": change,
                "ratio": ratio,
                "verdict": verdict,
            }
        )
    return {
        "figures": rows,
        "hints": {
            "added": sorted(hints_b - hints_a),
            "removed": sorted(hints_a - hints_b),
            "kept": sorted(hints_a & hints_b),
        },
    }


def _fmt(v: Any, unit: str) -> str:
    if v is None:
        return NA
    if unit == "%":
        return f"{v * 100:.1f}%"
    if unit == "s":
        return f"{v * 1e3:.2f} ms" if abs(v) < 1 else f"{v:.2f} s"
    if isinstance(v, float):
        return f"{v:.2f}"
    return f"{v:,}"


def render(d: dict[str, Any], name_a: str, name_b: str) -> str:
    rows = []
    for r in d["figures"]:
        ratio = "" if r["ratio"] is None else f"×{r['ratio']:.2f}"
        rows.append(
            [r["name"], _fmt(r["a"], r["unit"]), _fmt(r["b"], r["unit"]), ratio, r["verdict"]]
        )
    out = [f"A: {name_a}", f"B: {name_b}", "", table(["figure", "A", "B", "B/A", "B is"], rows)]
    h = d["hints"]
    if h["added"] or h["removed"]:
        out += [
            "",
            f"hints only in A: {', '.join(h['removed']) or '-'}",
            f"hints only in B: {', '.join(h['added']) or '-'}",
        ]
    better = [r["name"] for r in d["figures"] if r["verdict"] == "better"]
    worse = [r["name"] for r in d["figures"] if r["verdict"] == "worse"]
    out += [
        "",
        f"better in B: {', '.join(better) or 'nothing'}",
        f"worse in B: {', '.join(worse) or 'nothing'}",
    ]
    return lines(out) + "\n"
