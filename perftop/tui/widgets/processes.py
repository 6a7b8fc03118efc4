"""Processes / Workers: one row per process of the job with its role, CPU and memory.

Rows join the probe's :class:`ProcRow` with the roles the hook reported, so workers show
their index even before the first probe sample (figures N/A until then).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from textual.app import ComposeResult
from textual.markup import escape

from perftop.events.stacks import HELD_STATES
from perftop.fmt import process_label
from perftop.model import Snapshot
from perftop.model.roles import rank_workers, role_sort_key, role_text
from perftop.model.snapshot import ProcessRole, ProcRow
from perftop.model.stands import end_tag
from perftop.safe import visible_line
from perftop.tui import fmt
from perftop.tui.widgets.difftable import FIRST_ROWS, Cell, DiffTable, First
from perftop.tui.widgets.panel import Panel

COLUMNS = (
    ("role", "role"),
    ("pid", "pid"),
    ("cpu", "CPU%"),
    ("rss", "RSS"),
    ("uss", "USS"),
    ("pss", "PSS"),
    ("read", "read/s"),
    ("write", "write/s"),
    ("name", "command"),
)


def role_label(
    pid: int, role: ProcessRole | None, of_rank: bool = False
) -> tuple[str, tuple[int, ...]]:
    """Display text and sort key (the model's order: trainers, workers, then others)."""
    role = role or ProcessRole(pid, "other")
    return role_text(role, of_rank=of_rank), role_sort_key(role)


Proc = tuple[str, int, ProcRow | None, ProcessRole | None]  # host, pid, sample, role
FIRST = FIRST_ROWS  # a fleet's thousands of processes: the first of the table's order


def row_values(proc: Proc) -> tuple[Any, ...]:
    """The raw figures of the row, in column order: what its cells show and sort by."""
    host, pid, p, role = proc
    key = role_label(pid, role)[1]
    return ((host, key) if host else key, pid, *_figures(p))


def _figures(p: ProcRow | None) -> tuple[Any, ...]:
    """The sample's figures, in column order from CPU% on (N/A before the first sample)."""
    if p is None:
        return (*[None] * 6, "")
    return (
        p.cpu_percent,
        p.rss_bytes,
        p.uss_bytes,
        p.pss_bytes,
        p.io_read_bps,
        p.io_write_bps,
        process_label(p.name, p.cmdline),
    )


def row_cells(
    pid: int, p: ProcRow | None, role: ProcessRole | None, host: str = "", of_rank: bool = False
) -> list[Cell]:
    label, key = role_label(pid, role, of_rank)
    cpu, rss, uss, pss, read, write, name = _figures(p)
    dead = p is not None and not p.alive
    base = "dim strike" if dead else ""
    # stopped, or in uninterruptible sleep (htop's T, D): said before the command
    held = p.state if p is not None and p.alive and p.state in HELD_STATES else ""
    # ended by a signal or with an error, as it was seen to end: said before its command
    ended = end_tag(p, p.exit_code, p.exit_signal) if p is not None and dead else ""
    if held:
        name_cell = Cell(f"[{held}] {name}", name, style="bold yellow", justify="left")
    elif ended:
        name_cell = Cell(f"[{ended}] {name}", name, style="red strike", justify="left")
    else:
        name_cell = Cell(name, name, style=base or "dim", justify="left")

    def c(text: str, value: object, style: str = "") -> Cell:
        st = fmt.NA_STYLE if value is None else style
        return Cell(text, value, style=f"{base} {st}".strip())

    cpu_style = "" if cpu is None else "bold red" if cpu >= 95 else "yellow" if cpu >= 60 else ""
    role_style = {"main": "bold", "rank": "bold", "worker": "cyan"}.get(
        role.role if role else "", ""
    )
    if host:  # a collector's merged nodes: the role names the host too
        role_cell = Cell(f"{host} {label}", (host, key), justify="left")
    else:
        role_cell = Cell(label, key, style=f"{base} {role_style}".strip(), justify="left")
    return [
        role_cell,
        c(str(pid), pid),
        c(fmt.pct(cpu), cpu, cpu_style),
        c(fmt.bytes_(rss), rss),
        c(fmt.bytes_(uss), uss),
        c(fmt.bytes_(pss), pss),
        c(fmt.rate(read), read),
        c(fmt.rate(write), write),
        name_cell,
    ]


def procs(snap: Snapshot) -> dict[str, Proc]:
    """Rows keyed by pid, or ``host:pid`` where a collector merged nodes (pids repeat
    across hosts)."""
    samples = {(p.host, p.pid): p for p in snap.processes}
    roles = {(r.host, r.pid): r for r in snap.roles}
    # A worker that exited before any probe tick saw it (an evaluation's, a fraction of a
    # second long): struck through as exited, not shown as waiting for its first sample.
    # A fork runs its parent's command line (fork copies it): the row names it so.
    forks = {(ld.pid, ld.loader_id) for ld in snap.loaders if ld.start_method == "fork"}
    for w in snap.workers:
        if w.exited and ("", w.pid) in roles and ("", w.pid) not in samples:
            parent = samples.get(("", w.ppid))
            name = cmdline = ""
            if parent is not None and (w.ppid, roles[("", w.pid)].loader_id) in forks:
                name, cmdline = parent.name, parent.cmdline
            samples[("", w.pid)] = ProcRow(
                w.pid, w.ppid, name, cmdline, alive=False, state="exited"
            )
    keys = list(roles) + [k for k in samples if k not in roles]
    return {
        f"{host}:{pid}" if host else str(pid): (
            host,
            pid,
            samples.get((host, pid)),
            roles.get((host, pid)),
        )
        for host, pid in keys
    }


def cells_of(snap: Snapshot) -> Callable[[str, Proc], list[Cell]]:
    """A row's cells, its worker named by its rank where a rank's loader made it."""
    of_rank = rank_workers(snap.roles)

    def cells(key: str, proc: Proc) -> list[Cell]:
        host, pid, p, role = proc
        return row_cells(pid, p, role, host, (host, pid) in of_rank)

    return cells


def table_rows(snap: Snapshot) -> dict[str, list[Cell]]:
    """Every process's row (the table itself shows the first :data:`FIRST`)."""
    cells = cells_of(snap)
    return {k: cells(k, proc) for k, proc in procs(snap).items()}


class ProcessesPanel(Panel):
    TITLE = "Processes / Workers"
    DEFAULT_CSS = """
    ProcessesPanel.-compact > DiffTable { scrollbar-size-horizontal: 0; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.table = DiffTable(COLUMNS, sort="role", reverse=False)
        self._shown: tuple[object, ...] | None = None  # what the last show drew from

    def compose(self) -> ComposeResult:
        yield self.table

    def set_compact(self, compact: bool) -> None:
        super().set_compact(compact)
        self.set_class(compact, "-compact")

    def show(self, snap: Snapshot) -> None:
        # The processes are probed once a second, snapshots come twice: the same rows are
        # not made and compared again (the table keeps its rows, sort and cursor).
        stopped = snap.probe_stopped("procs")
        gone = tuple((w.pid, w.ppid) for w in snap.workers if w.exited)  # all procs() reads
        key = (snap.processes, snap.roles, gone, stopped, snap.meta.exit_code is None)
        if key == self._shown:
            return
        self._shown = key
        self.table.set_first(First(procs(snap), row_values, cells_of(snap), FIRST))
        n = len(snap.roles)
        workers = sum(1 for r in snap.roles if r.role == "worker")
        now = snap.running_workers()
        ended = f" ({workers - now} ended)" if workers > now else ""
        self.border_subtitle = f"{n} procs · {workers} workers{ended}" if n else "no processes yet"
        if self.table.left_out:
            self.border_subtitle += f" · the first {FIRST} listed (s sorts)"
        if stopped:
            # a title is markup: a recording's text escaped, and shown visibly
            self.border_subtitle = f"probe stopped: {escape(visible_line(stopped))}"
