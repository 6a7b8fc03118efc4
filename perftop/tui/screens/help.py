"""The ``?`` screen: every key, and what the colours mean."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.widgets import Static

from perftop.tui import fmt
from perftop.tui.screens.popup import ScrollPopup

KEYS = (
    ("?", "this help (↑ ↓ pgup pgdn scroll it; any other key closes it)"),
    ("q  ctrl+c", "quit; if the job still runs: stop it, or leave it running"),
    ("p", "pause / resume the display (the job and recording go on)"),
    ("z  enter", "zoom the focused panel to full screen and back (esc: back)"),
    ("tab  shift+tab", "focus the next / previous panel (or click it)"),
    (
        "1 … 9",
        "focus Steps, GPU, Host, Processes, Sync, Hints, Output, Ranks (2+ ranks), Ops (a capture)",
    ),
    ("s  i", "sort the focused table by the next column / invert the order"),
    ("click header", "sort a table by that column"),
    ("↑ ↓ pgup pgdn home end", "move in a table, scroll the output (end: follow)"),
    ("r", "start / stop recording"),
    ("k", "stacks: of the latest stalled step; samples in observer mode"),
    ("e", "go to the panel that proves the top hint (again: the next hint's)"),
    ("t", "capture the next 3 steps op by op (torch.profiler); the Ops panel shows them"),
    ("j", "type a line for the job's stdin (its input(), a breakpoint() prompt)"),
)


class HelpScreen(ScrollPopup):
    TITLE = "perftop help"

    def __init__(self, extra: tuple[tuple[str, str], ...] = ()) -> None:
        """``extra``: keys of a mode (a replay's), listed after the common ones."""
        super().__init__()
        self.extra = extra

    def body(self) -> ComposeResult:
        keys = Table.grid(padding=(0, 2))
        keys.add_column(style="bold cyan", no_wrap=True)
        keys.add_column()
        for k, what in KEYS + self.extra:
            keys.add_row(k, what)
        colours = Text()
        for phase, style in fmt.PHASE_STYLES.items():
            colours.append("■ ", style=style)
            colours.append(f"{phase}  ")
        colours.append("\n▲ ", style="bold red")
        colours.append(
            "a slow step: at least 3× the median (a stall, whose stacks `k` shows: 5× and 2 s)   "
        )
        colours.append("N/A", style=fmt.NA_STYLE)
        colours.append(
            " not available: no permission or no device; or not measured (a process's CPU%"
            " and IO rates need two samples, a second apart: one gone sooner has none;"
            " once it exited, none is current)"
        )
        yield Static(keys)
        yield Static(Text("\nStep phases, bottom to top:\n") + colours)
