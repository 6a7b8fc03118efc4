"""The report's ``stacks`` and ``stalls``: where sampled processes spent their time, and
what every process was doing while a step was stalled."""

from __future__ import annotations

from typing import Any

from perftop.fmt import stall_words
from perftop.model import Snapshot
from perftop.model.roles import role_of_pid
from perftop.model.snapshot import StallRow
from perftop.model.stacks import after_last_step, where

STALL_FRAMES = 8


def _frame(f: tuple[str, str, int]) -> dict[str, Any]:
    return {"function": f[0], "file": f[1], "line": f[2]}


def stacks_json(snap: Snapshot) -> list[dict[str, Any]]:
    """One entry per sampled process: its top frames and "where" with their share."""
    return [
        {
            "pid": r.pid,
            "role": r.role,
            "samples": r.samples,
            "top_frames": [{**_frame(f), "share": round(s, 4)} for f, s in r.frames],
            "where": [{"what": w, "share": round(s, 4)} for w, s in r.where],
        }
        for r in snap.stacks
    ]


def stalls_json(snap: Snapshot) -> list[dict[str, Any]]:
    return [_stall(snap, s) for s in snap.stalls]


def _stall(snap: Snapshot, s: StallRow) -> dict[str, Any]:
    """One stall; ``after_last_step`` where the job ended well with no step after it: its
    ``last_step`` (the index) and ``no_step_s``, the seconds from that step's end to the
    capture, null otherwise (``step`` names the step the capture awaited)."""
    tail = after_last_step(snap, s)
    return {
        "pid": s.pid,
        "step": s.step,
        "stalled_s": round(s.stalled_s, 3),
        "median_s": round(s.median_s, 6),
        "t": s.t,
        "processes": [
            {
                "pid": pid,
                "role": role,
                "label": role_of_pid(snap, pid, role, s.host),
                "state": s.state_of(pid),
                "frames": [_frame(f) for f in frames[:STALL_FRAMES]],
            }
            for pid, role, frames in s.stacks
        ],
        "note": s.note,
        "during": s.during,
        "host": s.host,
        "after_last_step": tail is not None,
        "last_step": tail[0] if tail else None,
        "no_step_s": round(tail[1], 3) if tail else None,
    }


def stack_lines(r: dict[str, Any]) -> list[str]:
    """Text report sections for ``stacks`` and ``stalls`` (empty when there are none)."""
    out: list[str] = []
    if r.get("stacks"):
        out += ["", "Where time goes (stack samples)"]
        for p in r["stacks"]:
            top = ", ".join(f"{w['what']} {w['share']:.0%}" for w in p["where"][:3])
            out.append(f"  {p['role']:<7} {p['pid']:>7}  {top}  ({p['samples']} samples)")
    if r.get("stalls"):
        if all(s.get("after_last_step") for s in r["stalls"]):
            out += ["", "After the last step (stacks captured while no step came)"]
        else:
            out += ["", "Stalled steps (stacks captured while stalled)"]
        for s in r["stalls"]:
            what, how = stall_words(
                s["step"], s["pid"], s["stalled_s"], s["median_s"], s.get("during", ""),
                (s["last_step"], s["no_step_s"]) if s.get("after_last_step") else None,
            )  # fmt: skip
            out.append(f"  {what}: {how}")
            for p in s["processes"]:
                frames = tuple((f["function"], f["file"], f["line"]) for f in p["frames"])
                label = p.get("label") or p["role"]  # (older reports: the role only)
                state = f"  [{p['state']}]" if p.get("state") else ""
                out.append(f"    {label:<8} {p['pid']:>7}  {where(frames)}{state}")
            if s["note"]:
                out.append(f"    note: {s['note']}")
    return out
