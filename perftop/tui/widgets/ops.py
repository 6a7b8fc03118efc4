"""Ops: the top ops of the latest on-demand capture (``t``), by self time per step,
grouped by phase, with the user's line that called each one.

The panel appears once a session has a capture (asked, running, refused or done): until
then it takes no room. A narrow terminal shows the top op of each phase; zoomed, the
table. The phase column sorts by phase in step order, heaviest op first within each.
"""

from __future__ import annotations

from rich.console import Group
from rich.text import Text
from textual.app import ComposeResult

from perftop.events.capture import PHASES
from perftop.model import Snapshot
from perftop.model.capture import Capture, CaptureOp, CapturePart
from perftop.model.capture_words import cost_text, status_line, steps_text
from perftop.safe import visible_line
from perftop.tui import fmt
from perftop.tui.widgets.difftable import Cell, DiffTable
from perftop.tui.widgets.panel import Panel
from perftop.tui.widgets.quiet import QuietStatic

# The figures before the op's name: a long name ("autograd::engine::evaluate_function:
# ConvolutionBackward0") never pushes them out of a narrow panel.
COLUMNS = (
    ("phase", "phase"),
    ("self", "self/step"),
    ("share", "%phase"),
    ("calls", "calls"),
)
DEVICE = ("device", "device/step")  # on an accelerator only
REST = (("op", "op"), ("where", "file:line"), ("shapes", "shapes"))
PHASE_STYLES = {"data": "yellow", "forward": "dodger_blue2", "backward": "medium_purple1",
                "optimizer": "green3", "between": "grey62"}  # fmt: skip
NO_CAPTURE = (
    "no capture yet: t captures the next 3 steps op by op (the job's own user; an attached "
    "viewer only with --allow-control); perftop trace PID from a shell"
)


def _phase_order(op: CaptureOp) -> float:
    """Sorted descending (as every other column, so ``s`` goes on to the heaviest first):
    phases in the order a step runs them, the heaviest op of each first."""
    i = PHASES.index(op.phase) if op.phase in PHASES else len(PHASES)
    return -(i + 1.0 - min(1.0, op.share or 0.0))


def op_cells(op: CaptureOp, device: bool) -> list[Cell]:
    style = PHASE_STYLES.get(op.phase, "")
    share = None if op.share is None else op.share * 100
    cells = [
        Cell(op.phase, _phase_order(op), style=style, justify="left"),
        Cell(fmt.secs(op.self_s), op.self_s),
        Cell(fmt.pct(share), share, style=fmt.NA_STYLE if share is None else ""),
        Cell(f"{op.calls:.3g}", op.calls),
    ]
    if device:
        cells.append(Cell(fmt.secs(op.device_s), op.device_s))
    cells.append(Cell(op.name, op.name, justify="left"))
    cells.append(Cell(op.where, op.where, justify="left"))
    cells.append(Cell(op.shapes, op.shapes, style="dim", justify="left"))
    return cells


def shown(snap: Snapshot) -> tuple[Capture | None, CapturePart | None]:
    """The latest capture, and the summary shown: its own, or the last one done before."""
    latest = snap.latest_capture
    done = next((c.done() for c in reversed(snap.captures) if c.done() is not None), None)
    return latest, done


def status(latest: Capture | None, part: CapturePart | None) -> Text:
    if latest is None:
        return Text(NO_CAPTURE, style="dim")
    style = {"refused": "bold yellow", "failed": "bold red"}.get(latest.state, "bold")
    line = Text()
    line.append(visible_line(status_line(latest)), style=style)  # a reason from the job
    if part is not None:
        if latest.done() is not part:
            line.append(f" · showing {steps_text(part.first_step, part.steps)}", style="dim")
        line.append(f" · {cost_text(part)}", style="dim")
        device = device_line(part)
        if device is not None:
            line.append("\n")
            line.append_text(device)
    return line


def device_line(part: CapturePart) -> Text | None:
    """On an accelerator: each phase's device time per step, split into kernels, copies
    and idle gaps ("fwd 12.1ms kernels 0.3ms copies 2.0ms idle")."""
    if not part.device:
        return None
    line = Text("device/step:", style="dim")
    for phase in PHASES:
        if phase in part.device:
            k, m, i = part.device[phase]
            line.append(f"  {phase} ", style=PHASE_STYLES.get(phase, ""))
            line.append(f"{fmt.secs(k)} kernels {fmt.secs(m)} copies {fmt.secs(i)} idle")
    return line


def summary(part: CapturePart | None) -> list[Text]:
    """The top op of each phase, one line each (narrow terminals), the heaviest op first:
    a phase long in waiting (data behind slow workers) has light ops, and two lines must
    show where the compute went."""
    tops = []
    for phase in PHASES:
        ops = [op for op in (part.ops if part else ()) if op.phase == phase]
        if ops:
            tops.append((phase, max(ops, key=lambda op: op.self_s)))
    lines = []
    for phase, top in sorted(tops, key=lambda pt: -pt[1].self_s):
        t = Text(f"{phase:<9}", style=PHASE_STYLES.get(phase, ""))
        t.append(f" {visible_line(top.name)} {fmt.secs(top.self_s)}/step")
        if top.share is not None:
            t.append(f" {top.share:.0%}", style="bold")
        if top.where:
            t.append(f" {visible_line(top.where)}", style="dim")
        lines.append(t)
    return lines


class OpsPanel(Panel):
    TITLE = "Ops"
    DEFAULT_CSS = """
    OpsPanel > #ops-status { height: auto; }
    OpsPanel > #ops-summary { display: none; height: auto; }
    OpsPanel.-compact > DiffTable, OpsPanel.-nodata > DiffTable { display: none; }
    OpsPanel.-compact > #ops-summary { display: block; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.table = DiffTable((*COLUMNS, *REST), sort="phase", reverse=True)
        self.status = QuietStatic(Text(NO_CAPTURE, style="dim"), id="ops-status")
        self.summary = QuietStatic("", id="ops-summary")
        self.display = False
        self._seen: tuple[Capture, ...] = ()

    def compose(self) -> ComposeResult:
        yield self.status
        yield self.summary
        yield self.table

    def set_compact(self, compact: bool) -> None:
        super().set_compact(compact)
        self.set_class(compact, "-compact")
        self.can_focus = compact

    def show(self, snap: Snapshot) -> None:
        latest, part = shown(snap)
        any_capture = latest is not None
        if self.display != any_capture:
            self.display = any_capture
            if self.parent is not None:
                self.parent.set_class(any_capture, "-ops")
        seen = self._seen  # a capture that changes is a new object: the same ones, no work
        if not any_capture or (
            len(seen) == len(snap.captures) and all(a is b for a, b in zip(seen, snap.captures))
        ):
            return
        self._seen = snap.captures
        self.status.update(status(latest, part))
        self.set_class(part is None, "-nodata")
        self.summary.update(Group(*summary(part)))
        if part is None:
            self.border_subtitle = ""
            return
        device = any(op.device_s for op in part.ops)
        self.table.set_columns((*COLUMNS, DEVICE, *REST) if device else (*COLUMNS, *REST))
        self.table.set_rows(
            {f"{i}:{op.phase}:{op.name}": op_cells(op, device) for i, op in enumerate(part.ops)}
        )
        more = f" (+{part.more_ops} smaller)" if part.more_ops else ""
        self.border_subtitle = f"pid {part.pid} · {len(part.ops)} ops{more}"
