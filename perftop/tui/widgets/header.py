"""The header: what runs, its PIDs, elapsed time, state, recording, drops, our own CPU;
once the job ended, its training processes cut short (their last steps missing).

Elapsed time comes from the snapshot (monitor clock at snapshot time), never from a clock
read while rendering, so the same snapshot always renders the same header.
"""

from __future__ import annotations

import os

from rich.console import Group
from rich.text import Text

from perftop.fmt import clip
from perftop.fmt import command as command_line
from perftop.model import Snapshot
from perftop.report.build import cut_short
from perftop.safe import visible_line
from perftop.tui import fmt
from perftop.tui.mode import AppMode
from perftop.tui.widgets.quiet import QuietStatic


class HeaderBar(QuietStatic):
    DEFAULT_CSS = """
    HeaderBar {
        height: 2;
        background: $panel;
        color: $text;
        padding: 0 1;
    }
    """

    def __init__(self, *, id: str | None = None, mode: AppMode = "") -> None:
        super().__init__("perftop", id=id, markup=False)
        self.mode = mode  # "", "viewer" or "observer" (see PerftopApp)
        self.paused = False
        self.recording: str | None = None  # set by the app when recording is toggled
        self._snap: Snapshot | None = None

    def show(self, snap: Snapshot) -> None:
        self._snap = snap
        self.update(self.compose_text(snap))

    def on_resize(self) -> None:
        if self._snap is not None:
            self.show(self._snap)

    def set_paused(self, paused: bool) -> None:
        self.paused = paused
        if self._snap is not None:
            self.show(self._snap)

    def compose_text(self, snap: Snapshot) -> Group:
        """The header's two lines, each a part of its own (drawn and repainted apart)."""
        m = snap.meta
        w = max(20, self.size.width - 2 if self.size.width else 78)
        state = m.state
        state_style = (
            "bold green"
            if state == "running"
            else "bold red"
            if m.exit_code not in (None, 0)
            else "bold"
        )
        right = Text()
        if self.mode == "observer" or m.observer:
            right.append(" OBSERVER: no hook ", style="bold black on magenta")
            right.append(" ")
        elif self.mode == "viewer":
            right.append(" VIEWER (read-only) ", style="bold black on cyan")
            right.append(" ")
        if self.paused:
            right.append(" PAUSED ", style="bold black on yellow")
            right.append(" ")
        right.append("● " + state, style=state_style)
        right.append("  " + fmt.clock(m.elapsed_s), style="bold")
        cmd = visible_line(command_line(m.command))
        cmd = clip(cmd, max(5, w - len(right) - 10))
        line1 = Text("perftop ", style="bold cyan")
        line1.append(cmd, style="bold")
        line1.append(" " * max(1, w - len(line1) - len(right)))
        line1.append_text(right)

        line2 = Text()
        pids = [t.pid for t in snap.trainers] or ([m.job_pid] if m.job_pid else [])
        line2.append("pid ", style="dim")
        line2.append(",".join(str(p) for p in pids[:4]) + ("…" if len(pids) > 4 else "") or "-")
        short = cut_short(snap)
        if short:  # ended without the hook's last send: its last steps are missing
            line2.append("  cut short", style="bold yellow")
            if set(short) != set(pids):  # which of them, where not all
                line2.append(" " + ",".join(str(p) for p in short[:3]))
                line2.append("…" if len(short) > 3 else "")
            line2.append(" (last steps missing)", style="yellow")
        # While the job runs, its workers now (a loader without persistent workers starts
        # new ones each epoch, which counted twice here)
        workers = snap.running_workers()
        if workers:
            line2.append(f" +{workers} workers", style="dim")
        line2.append("  dropped ", style="dim")
        line2.append(f"{m.dropped_events:,}", style="yellow" if m.dropped_events else None)
        if m.monitor_dropped:
            line2.append(" +perftop ", style="dim")
            line2.append(f"{m.monitor_dropped:,}", style="yellow")
        line2.append("  perftop CPU ", style="dim")
        # once the job ended, what perftop took over the run: its last reading is of the
        # end's own work (the whole run's figures and hints), often several times the rest
        ended = m.ended and m.monitor_cpu_avg is not None
        cpu = m.monitor_cpu_avg if ended else m.monitor_cpu_percent
        line2.append(fmt.pct(cpu), style=fmt.NA_STYLE if cpu is None else None)
        if ended:
            line2.append(" avg", style="dim")
        rec = self.recording if self.recording is not None else m.record_path
        if rec and m.exit_code is not None:  # the recording ended with the job
            line2.append("  saved ", style="dim")
            line2.append(os.path.basename(rec), style="green")
        else:
            line2.append("  rec ", style="dim")
            line2.append(os.path.basename(rec) if rec else "off", style="red" if rec else "dim")
        line2.truncate(w)
        # the clock moves line 1 each second, the CPU figure line 2 at each snapshot
        line1.no_wrap = line2.no_wrap = True
        line1.overflow = line2.overflow = "crop"
        return Group(line1, line2)
