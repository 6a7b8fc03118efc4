"""Number formatting shared by every panel: compact, aligned, with units; ``None`` is N/A.

One module so all panels agree on widths and on how a missing figure looks.
"""

from __future__ import annotations

from rich.text import Text

from perftop.fmt import NA, nbytes, seconds
from perftop.fmt import rate as report_rate

NA_STYLE = "dim"

# Colours carry meaning only: ok / warn / bad, and one per step phase.
PHASE_STYLES = {
    "data": "yellow",
    "forward/other": "dodger_blue2",
    "backward": "medium_purple1",
    "optimizer": "green3",
}
PHASE_SHORT = {"data": "data", "forward/other": "fwd", "backward": "bwd", "optimizer": "opt"}


def num(value: float | None, fmt: str = "{:.1f}") -> str:
    return NA if value is None else fmt.format(value)


def pct(value: float | None) -> str:
    return NA if value is None else f"{value:.0f}%" if value >= 10 else f"{value:.1f}%"


def bytes_(value: float | None) -> str:
    """1536 -> '1.5K'; powers of 1024 like htop and free."""
    return nbytes(value, compact=True)


def rate(value: float | None) -> str:
    return report_rate(value, compact=True)


secs = seconds  # 850µs, 12.3ms, 1.25s, 2m05s: the same everywhere


def clock(value: float | None) -> str:
    """Elapsed time as h:mm:ss."""
    if value is None:
        return "--:--:--"
    s = int(value)
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


def level_style(fraction: float | None, warn: float = 0.6, bad: float = 0.85) -> str:
    if fraction is None:
        return NA_STYLE
    return "red" if fraction >= bad else "yellow" if fraction >= warn else "green"


def bar(fraction: float | None, width: int, style: str | None = None) -> Text:
    """A horizontal bar ``[|||||     ]`` of ``width`` cells including brackets."""
    inner = max(1, width - 2)
    if fraction is None:
        return Text("[" + NA.center(inner) + "]", style=NA_STYLE)
    f = min(1.0, max(0.0, fraction))
    filled = round(f * inner)
    t = Text("[", style="bold")
    t.append("|" * filled, style=style or level_style(f))
    t.append(" " * (inner - filled))
    t.append("]", style="bold")
    return t


VBLOCKS = " ▁▂▃▄▅▆▇█"


def vblock(fraction: float | None) -> Text:
    """One cell tall bar, for per-core rows that must fit many cores in little room."""
    if fraction is None:
        return Text("·", style=NA_STYLE)
    f = min(1.0, max(0.0, fraction))
    return Text(VBLOCKS[max(1, round(f * 8))], style=level_style(f))
