"""The collectives of one rank, under the Ranks table: the rank under its cursor.

A line on the rank's wait at the collectives (exposed per step, its share of the step, the
wait overlapped with compute, the rank it waits for most), then each site that launched
its collectives, as the text report lists them (:func:`perftop.report.comm.site_texts`):
op, process group, the phase of the step, count, per step, bytes, the op's median wait,
and the user's line with the ``torch.distributed`` call (none for DDP's buckets, which
C++ launches). Not zoomed, the line ends with the heaviest site; zoomed, the table.
While a collective hangs, the line says which, and where each rank that never entered it
stands (its stack's innermost frame, once its node's perftop dumped it).
"""

from __future__ import annotations

from typing import Any

from rich.console import Group
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical

from perftop.model import Snapshot
from perftop.model.comm_rows import rank_name
from perftop.model.snapshot import StepStats
from perftop.model.stacks import placed
from perftop.model.stands import ended_row, ended_short, hang_called
from perftop.report.comm import hang_json, rank_comm, short_line, site_texts, sites_of
from perftop.tui import fmt
from perftop.tui.widgets.difftable import Cell, DiffTable
from perftop.tui.widgets.ops import PHASE_STYLES
from perftop.tui.widgets.quiet import QuietStatic

# The figures and the line first: 80 columns show them, and scroll to the rest.
COLUMNS = (
    ("op", "op"),
    ("phase", "phase"),
    ("count", "count"),
    ("step", "a step"),
    ("bytes", "bytes"),
    ("wait", "wait p50"),  # the op's, all its sites together
    ("line", "line"),
    ("pg", "group"),
    ("call", "call"),
)


def name(r: StepStats) -> str:
    return rank_name(r.rank, r.pid)


def site_rows(rank: dict[str, Any], steps: int) -> dict[str, list[Cell]]:
    """The table's rows: one per site of each collective, the most frequent first."""
    out: dict[str, list[Cell]] = {}
    for c in rank["collectives"]:
        wait = c.get("wait_p50_s")
        for s in sites_of(c):
            line, op, pg, phase, call, count, per, nb = site_texts(c, s, steps)
            key = "\x1f".join((c["pg"], c["op"], s["phase"], s["call"], s["line"]))
            out[key] = [
                Cell(op, op, justify="left"),
                Cell(phase, phase, style=PHASE_STYLES.get(s["phase"], ""), justify="left"),
                Cell(count, s["count"]),
                Cell(per, s["count"] / steps if steps else None),
                Cell(nb, s["bytes"]),
                Cell(fmt.secs(wait), wait, style=fmt.NA_STYLE if wait is None else ""),
                Cell(line, s["line"], justify="left"),
                Cell(pg, pg, justify="left"),
                Cell(call, s["call"], justify="left"),
            ]
    return out


def heading(snap: Snapshot, r: StepStats, rank: dict[str, Any], full: bool) -> Text:
    """The rank's wait at the collectives; not ``full``, its heaviest site first (the
    table above has its exposed wait)."""
    line = Text(f"{name(r)}: ", style="bold")
    if not rank["collectives"]:
        line.append(f"no collectives ({snap.comm.note or 'none recorded'})", style=fmt.NA_STYLE)
        return line
    if not full:
        c = rank["collectives"][0]  # the most bytes
        where, op, _pg, phase, *_ = site_texts(c, sites_of(c)[0], r.count)
        line.append(f"{op} in {phase} at {where} · z: all · ")
    wait, share = rank["comm_wait_s"], rank["comm_exposed_fraction"]
    if wait is None:
        line.append("wait not measured yet (no collective matched across ranks)", style="dim")
    else:
        line.append(f"exposed comm wait {fmt.secs(wait)}/step")
        if share is not None:
            line.append(f" {share:.0%}", style="bold")
        line.append(f" · overlapped {fmt.secs(rank['comm_overlap_s'])}")
        if rank["comm_waited_for_rank"] is not None:
            line.append(f" · waits for rank {rank['comm_waited_for_rank']}")
    if rank["comm_records_lost"]:
        line.append(f" · {rank['comm_records_lost']:,} records lost", style="yellow")
    return line


def hang_line(snap: Snapshot) -> Text | None:
    """The hang going on (the report's ``hangs[]`` entry), where each rank that never
    entered it stands first (what an 80-column panel shows), then the line the others wait
    at; a desync, the op each rank entered."""
    h = next((h for h in snap.comm.hangs if h.ongoing), None)
    if h is None:
        return None
    if h.desync:
        return Text(f"DESYNC: {h.words}", style="bold red")
    j = hang_json(snap, h)
    line = Text(f"HANG {h.waited_s:.0f} s: ", style="bold red")
    where = []
    for m in j["missing"]:
        end = ended_row(snap, m["pid"], m["host"], hang_called(h))
        if end is not None:  # "rank 1 ended (SIGKILL) never entered …": the hint says more
            where.append(f"rank {m['rank']} {ended_short(snap, end)}")
            continue
        held = f" ({m['state']})" if m["state"] else ""  # ("stopped": the hint says what)
        at = placed(m["where"]) if m["where"] else "(no stack yet)"
        where.append(f"rank {m['rank']}{held} {at}")
    line.append(", ".join(where) + " never entered " if where else "every rank entered ", "red")
    line.append(f"{h.op} {h.pg} seq {h.seq}", style="bold")
    entered = sorted({short_line(e["line"]) for e in j["entered"] if e["line"]})
    if entered:
        line.append(f" · the others wait at {', '.join(entered)}")
    return line


class RankColls(Vertical):
    DEFAULT_CSS = """
    RankColls { height: auto; }
    RankColls.-none { display: none; }
    RankColls > QuietStatic { height: 1; }
    RankColls > DiffTable { display: none; height: auto; }
    RankColls.-full > DiffTable { display: block; }
    """

    def __init__(self) -> None:
        super().__init__()
        self.line = QuietStatic("", markup=False)
        self.table = DiffTable(COLUMNS, sort="count", reverse=True)

    def compose(self) -> ComposeResult:
        yield self.line
        yield self.table

    def show(self, snap: Snapshot, r: StepStats | None, full: bool) -> None:
        """The collectives of rank ``r`` (none: nothing shown); ``full``: the table too."""
        self.set_class(full, "-full")
        none = r is None or not (snap.comm.ranks or snap.comm.note)
        self.set_class(none, "-none")  # ranks that make no collective (hogwild): no line
        if r is None or none:
            self.set_class(False, "-hang")
            self.table.set_rows({})
            return
        rank = rank_comm(snap, r.pid, r.host)
        hang = hang_line(snap)
        self.set_class(hang is not None, "-hang")
        line = hang or heading(snap, r, rank, full)
        line.no_wrap, line.overflow = True, "ellipsis"
        self.line.update(Group(line))  # a Group keeps no_wrap (a bare Text wraps)
        self.table.set_rows(site_rows(rank, r.count) if full else {})
