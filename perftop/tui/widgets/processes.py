"""Processes / Workers: one row per process of the job with its role, CPU and memory.

Rows join the probe's :class:`ProcRow` with the roles the hook reported, so workers show
their index even before the first probe sample (figures N/A until then).
"""

from __future__ import annotations

from textual.app import ComposeResult

from perftop.model import Snapshot
from perftop.model.roles import role_sort_key
from perftop.model.snapshot import ProcessRole, ProcRow
from perftop.tui import fmt
from perftop.tui.widgets.difftable import Cell, DiffTable
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


def role_label(pid: int, role: ProcessRole | None) -> tuple[str, tuple[int, ...]]:
    """Display text and sort key (the model's order: trainers, workers, then others)."""
    role = role or ProcessRole(pid, "other")
    if role.role == "rank":
        return f"rank {role.rank}", role_sort_key(role)
    if role.role == "worker":
        text = "worker" if role.worker_id is None else f"worker {role.worker_id}"
        if role.loader_id:
            text += f"·L{role.loader_id}"
        return text, role_sort_key(role)
    return role.role, role_sort_key(role)


def row_cells(pid: int, p: ProcRow | None, role: ProcessRole | None) -> list[Cell]:
    label, key = role_label(pid, role)
    dead = p is not None and not p.alive
    base = "dim strike" if dead else ""

    def c(text: str, value: object, style: str = "") -> Cell:
        st = fmt.NA_STYLE if value is None else style
        return Cell(text, value, style=f"{base} {st}".strip())

    cpu = None if p is None else p.cpu_percent
    cpu_style = "" if cpu is None else "bold red" if cpu >= 95 else "yellow" if cpu >= 60 else ""
    role_style = {"main": "bold", "rank": "bold", "worker": "cyan"}.get(
        role.role if role else "", ""
    )
    name = "" if p is None else (p.name or p.cmdline)
    return [
        Cell(label, key, style=f"{base} {role_style}".strip(), justify="left"),
        c(str(pid), pid),
        c(fmt.pct(cpu), cpu, cpu_style),
        c(fmt.bytes_(None if p is None else p.rss_bytes), None if p is None else p.rss_bytes),
        c(fmt.bytes_(None if p is None else p.uss_bytes), None if p is None else p.uss_bytes),
        c(fmt.bytes_(None if p is None else p.pss_bytes), None if p is None else p.pss_bytes),
        c(fmt.rate(None if p is None else p.io_read_bps), None if p is None else p.io_read_bps),
        c(fmt.rate(None if p is None else p.io_write_bps), None if p is None else p.io_write_bps),
        Cell(name[:40], name, style=base or "dim", justify="left"),
    ]


def table_rows(snap: Snapshot) -> dict[str, list[Cell]]:
    """Rows keyed by pid, or ``host:pid`` where a collector merged nodes (pids repeat
    across hosts); the role then names the host too."""
    procs = {(p.host, p.pid): p for p in snap.processes}
    roles = {(r.host, r.pid): r for r in snap.roles}
    keys = list(roles) + [k for k in procs if k not in roles]
    rows = {}
    for host, pid in keys:
        cells = row_cells(pid, procs.get((host, pid)), roles.get((host, pid)))
        if host:
            cells[0] = Cell(f"{host} {cells[0].plain}", (host, cells[0].value), justify="left")
        rows[f"{host}:{pid}" if host else str(pid)] = cells
    return rows


class ProcessesPanel(Panel):
    TITLE = "Processes / Workers"
    DEFAULT_CSS = """
    ProcessesPanel.-compact > DiffTable { scrollbar-size-horizontal: 0; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.table = DiffTable(COLUMNS, sort="role", reverse=False)

    def compose(self) -> ComposeResult:
        yield self.table

    def set_compact(self, compact: bool) -> None:
        super().set_compact(compact)
        self.set_class(compact, "-compact")

    def show(self, snap: Snapshot) -> None:
        self.table.set_rows(table_rows(snap))
        n = len(snap.roles)
        workers = sum(1 for r in snap.roles if r.role == "worker")
        self.border_subtitle = f"{n} procs · {workers} workers" if n else "no processes yet"
        stopped = snap.probe_stopped("procs")
        if stopped:
            self.border_subtitle = f"probe stopped: {stopped}"
