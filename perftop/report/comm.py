"""The report's collectives: per rank (``ranks[].collectives``, ``ranks[].comm_wait_s``),
the straggler by who arrives last (``comm``), and hung or desynchronized collectives
(``hangs``), with the stack of each rank that never entered."""

from __future__ import annotations

from typing import Any

from perftop.codepath import code_line
from perftop.fmt import HELD_SHORT, nbytes, seconds, step_no, table
from perftop.fmt import stall_words as capture_words
from perftop.model import Snapshot
from perftop.model.comm_rows import HangRank, HangRow, RankComm
from perftop.model.snapshot import StallRow
from perftop.model.stacks import after_last_step, where
from perftop.model.stands import (
    ended_row,
    ended_short,
    first_stack,
    hang_called,
    held,
    how_ended,
)

STACK_FRAMES = 8
LONGER_S = 0.001  # another rank's median wait at an op, over the first rank's: said


def _r(x: float | None, nd: int = 6) -> float | None:
    return None if x is None else round(x, nd)


def rank_comm(snap: Snapshot, pid: int | None, host: str) -> dict[str, Any]:
    """The keys a ``ranks[]`` entry gets (null figures where nothing was measured)."""
    c: RankComm | None = next(
        (r for r in snap.comm.ranks if r.pid == pid and (not host or r.host == host)), None
    )
    s = snap.comm.straggler
    return {
        "collectives": [
            {
                "pg": x.pg,
                "op": x.op,
                "count": x.count,
                "bytes": x.bytes,
                "wait_p50_s": _r(x.wait_p50_s),
                "training_thread": x.training_thread,
                "sites": [
                    {
                        "phase": y.phase,
                        "call": y.call,
                        "line": y.line,
                        "count": y.count,
                        "bytes": y.bytes,
                    }
                    for y in x.sites
                ],
            }
            for x in (c.collectives if c else ())
        ],  # fmt: skip
        "comm_wait_s": _r(c.wait_s) if c else None,
        "comm_overlap_s": _r(c.overlap_s) if c else None,
        "comm_exposed_fraction": _r(c.exposed_share, 4) if c else None,
        "comm_waited_for_rank": c.waited_for if c else None,
        "comm_records_lost": c.lost if c else None,
        "comm_straggler": s is not None and s.pid == pid and (not host or s.host == host),
    }


def comm_json(snap: Snapshot) -> dict[str, Any]:
    s = snap.comm.straggler
    return {
        "straggler": None
        if s is None
        else {
            "rank": s.rank,
            "pid": s.pid,
            "host": s.host,
            "others_wait_s": _r(s.wait_s),
            "step_s": _r(s.step_s),
            "arrived_last_fraction": _r(s.last_share, 4),
            "wait_fraction": _r(s.wait_share, 4),
        },  # fmt: skip
        "note": snap.comm.note,
    }


def hang_json(snap: Snapshot, h: HangRow) -> dict[str, Any]:
    return {
        "kind": "desync" if h.desync else "hang",
        "pg": h.pg,
        "seq": h.seq,
        "op": h.op,
        "sizes": h.sizes,
        "t_created": h.t_created,
        "waited_s": h.waited_s,
        "threshold_s": h.threshold_s,
        "ongoing": h.ongoing,
        "entered": [
            {"rank": r.rank, "pid": r.pid, "host": r.host, "op": r.op, "line": r.line}
            for r in h.ranks
            if r.entered
        ],  # fmt: skip
        "missing": [_missing(snap, h, r) for r in h.missing],
    }


def _missing(snap: Snapshot, h: HangRow, r: HangRank) -> dict[str, Any]:
    frames, why = first_stack(snap, r.pid, h.t_created, r.host)  # innermost first
    by = hang_called(h)
    return {
        "rank": r.rank,
        "pid": r.pid,
        "host": r.host,
        "last_seq": r.last_seq,
        "last_op": r.last_op,
        "stack": [{"function": f[0], "file": f[1], "line": f[2]} for f in frames[:STACK_FRAMES]],
        "stack_note": why,
        # where it stood in words: its own line and the call it made there, as the hint,
        # the Ranks line and the k screen say it
        "where": where(frames) if frames else "",
        "state": held(snap, r.pid, h.t_created, r.host),
        # its process ended (how, where that was read): it will never enter; "" if alive
        "ended": how_ended(snap, end) if (end := ended_row(snap, r.pid, r.host, by)) else "",
    }


def stall_words(snap: Snapshot, s: StallRow) -> str:
    """A stalled step in a few words, its rank named where it has one (the TUI's notice,
    the headless line)."""
    rank = next((r.rank for r in snap.ranks if r.pid == s.pid and r.rank is not None
                 and (not s.host or r.host == s.host)), None)  # fmt: skip
    of = f" of rank {rank}" if rank is not None else ""
    during = f" ({s.during})" if s.during else ""  # (in a pass, a collective)
    state = s.state_of(s.pid)
    held_too = f", its process {HELD_SHORT[state]}" if state else ""
    return f"step {step_no(s.step)}{of} stalled {s.stalled_s:.1f} s{during}{held_too}"


def tail_words(snap: Snapshot) -> dict[tuple[float, int], str]:
    """The stalls said live that the job's end showed to be its work after training (no
    step came after the capture, and the job exited with 0), by capture (as
    :func:`new_stalls`), in the report's words: the last word on each where a stall was
    said (the headless summary, the TUI's notice)."""
    out = {}
    for s in snap.stalls:
        tail = after_last_step(snap, s)
        if tail is not None:
            what, how = capture_words(s.step, s.pid, s.stalled_s, s.median_s, s.during, tail)
            out[(s.t, s.pid)] = f"{what}: {how} (said live as a stall)"
    return out


def new_stalls(snap: Snapshot, seen: set[tuple[float, int]]) -> list[StallRow]:
    """The stalls of ``snap`` not in ``seen`` (those said before), and ``seen`` theirs from
    now on. By key, not by count: a snapshot keeps only the last MAX_STALLS (50), so a count
    stops growing there and every later stall would go unsaid. The key is the capture (its
    time and process), not its step: the model names a stall by another step once the
    process's steps go on (model/stacks.py), which is no new stall to say."""
    keys = [(s.t, s.pid) for s in snap.stalls]
    fresh = [s for s, k in zip(snap.stalls, keys, strict=True) if k not in seen]
    seen.clear()
    seen.update(keys)
    return fresh


def hang_words(snap: Snapshot, h: HangRow) -> str:
    """:attr:`HangRow.words`, and each missing rank held where it stands (``stopped``): the
    TUI's notice, the line without one."""
    held_too = [f"{r.label} {HELD_SHORT[st]}" for r in h.missing
                if (st := held(snap, r.pid, h.t_created, r.host))]  # fmt: skip
    ended = [f"{r.label} {ended_short(snap, end)}" for r in h.missing
             if (end := ended_row(snap, r.pid, r.host, hang_called(h))) is not None]  # fmt: skip
    return "; ".join([h.words, *held_too, *ended])


def hang_notice(snap: Snapshot, h: HangRow) -> str:
    """A hang's or a desync's line where no TUI shows its notice (headless, the summary)."""
    words = hang_words(snap, h)
    return f"perftop: {words}" if h.desync else f"perftop: hang: {words}"


def hangs_json(snap: Snapshot) -> list[dict[str, Any]]:
    return [hang_json(snap, h) for h in snap.comm.hangs]


def hang_lines(r: dict[str, Any]) -> list[str]:
    """The text report's section on hung and desynchronized collectives."""
    if not r.get("hangs"):
        return []
    out = ["", "Hung collectives"]
    for h in r["hangs"]:
        what = ("desync" if h["kind"] == "desync" else
                f"waited {h['waited_s']:.0f} s (a hang from {h['threshold_s']:.3g} s)")  # fmt: skip
        out.append(f"  {h['op']} {h['pg']} seq {h['seq']} {h['sizes']}: {what}")
        for e in h["entered"]:
            out.append(f"    rank {_s(e['rank'])} entered {e['op']}  {e['line'] or '-'}")
        for m in h["missing"]:
            at = m.get("where") or "no stack"
            if not m["stack"] and m.get("stack_note"):
                at += f": {m['stack_note']}"
            state = f"  [{m['state']}]" if m.get("state") else ""
            state += f"  [{m['ended']}]" if m.get("ended") else ""
            out.append(f"    rank {_s(m['rank'])} not entered (last seen seq {_s(m['last_seq'])} "
                       f"{m['last_op'] or '-'})  {at}{state}")  # fmt: skip
    return out


SITE_HEAD = ["line", "op", "group", "phase", "call", "count", "a step", "bytes"]


def sites_of(c: dict[str, Any]) -> list[dict[str, Any]]:
    """A ``ranks[].collectives[]`` entry's sites (one without a site for an older report)."""
    return c.get("sites") or [{"phase": "", "call": "", "line": "", **c}]


def short_line(line: str) -> str:
    """A user's line (``file:line function``) with its file's name only (a library's from
    its package's folder on)."""
    return code_line(line or "-")


def site_texts(c: dict[str, Any], s: dict[str, Any], steps: int) -> list[str]:
    """One site of collective ``c`` as the report and the TUI write it, in ``SITE_HEAD``
    order: the user's line cut to its file's name, and ``count`` per step of ``steps``."""
    return [
        short_line(s["line"]), c["op"], c["pg"],
        s["phase"] or "-", s["call"] or "-", str(s["count"]),
        f"{s['count'] / steps:.1f}" if steps else "-", nbytes(s["bytes"]),
    ]  # fmt: skip


def collective_lines(r: dict[str, Any]) -> list[str]:
    """The text report's collectives of the first rank that made any: where each came
    from, and each op's median wait (as the TUI's Ranks view has it); then each other
    rank's ops it waited at 1 ms or more longer than that rank (a barrier after work the
    first rank did alone: the others wait there). All of them: ``ranks[].collectives``."""
    ranks = [x for x in r.get("ranks") or () if x.get("collectives")]
    if not ranks:
        return []
    rank = ranks[0]
    steps = rank.get("steps") or 0
    rows = [
        [*site_texts(c, s, steps), seconds(c.get("wait_p50_s"))]
        for c in rank["collectives"]
        for s in sites_of(c)
    ]
    out = ["", f"Collectives (rank {_s(rank['rank'])}, {steps} steps)"]
    out.append(table([*SITE_HEAD, "wait p50"], rows))
    first = {(c["pg"], c["op"]): c.get("wait_p50_s") or 0.0 for c in rank["collectives"]}
    for other in ranks[1:]:
        longer = [
            f"{c['op']} {seconds(c['wait_p50_s'])}"
            for c in other["collectives"]
            if (c.get("wait_p50_s") or 0.0) >= first.get((c["pg"], c["op"]), 0.0) + LONGER_S
        ]
        if longer:
            out.append(f"  rank {_s(other['rank'])} waits longer (p50): {', '.join(longer)}")
    return out


def _s(x: Any) -> str:
    return "-" if x is None else str(x)
