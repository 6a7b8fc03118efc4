"""The replay timeline: the whole recording as one bar, where we are, where slow steps were.

One cell per slice of session time; a cell whose slow steps (≥3× the median) took at least
:data:`MARK_SHARE` of its time beyond the median is a red ``▲``, one where an interval
between steps began (evaluation, checkpointing) a yellow ``◆``, the played part is shaded,
the position is a bright block, and the part the index has not read yet is dim. The share
keeps a mark worth a look: a tight loop's scheduler jitter makes steps of 3× a 0.2 ms
median every second, which marked every cell of a long run (2,019 in 4 minutes).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence

from rich.text import Text
from textual.widgets import Static

from perftop.replay.controller import ReplayState
from perftop.tui import fmt

MARK_SHARE = 0.01


def timeline(state: ReplayState, width: int) -> Text:
    """The bar for ``state`` in ``width`` cells, with elapsed / total at its ends."""
    start, end, now = state.start_t, state.end_t, state.now_t
    left = fmt.clock(None if now is None or start is None else now - start)
    right = fmt.clock(None if end is None or start is None else end - start)
    if not state.index_done:
        right += f" (indexing {state.indexed:.0%})"
    cells = max(4, width - len(left) - len(right) - 2)
    t = Text(left + " ", style="bold")
    if start is None or end is None or end <= start:
        t.append("─" * cells, style="dim")
    else:
        span = (end - start) / cells
        pos = min(cells - 1, int(((now or start) - start) / span)) if now is not None else -1
        for i in range(cells):
            a = start + i * span
            if i == pos:
                t.append("█", style="bold cyan")
            elif _cost(state.stalls, state.stall_cost, a, a + span) >= MARK_SHARE * span:
                t.append("▲", style="bold red")
            elif _within(state.gaps, a, a + span):
                t.append("◆", style="bold yellow")
            else:
                t.append("━" if i < pos else "─", style="cyan" if i < pos else "dim")
    t.append(" " + right, style="bold" if state.index_done else "dim")
    t.no_wrap, t.overflow = True, "ellipsis"
    return t


def _cost(times: Sequence[float], cum: Sequence[float], a: float, b: float) -> float:
    """The time beyond the median of the slow steps that ended in [a, b)."""
    i, j = bisect_left(times, a), bisect_left(times, b)
    if j <= i or len(cum) < j:
        return 0.0
    return cum[j - 1] - (cum[i - 1] if i else 0.0)


def _within(times: tuple[float, ...], a: float, b: float) -> bool:
    j = bisect_left(times, a)
    return j < len(times) and times[j] < b


class TimelineBar(Static):
    DEFAULT_CSS = """
    TimelineBar { height: 1; padding: 0 1; background: $panel; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__("", id=id, markup=False)
        self._state: ReplayState | None = None

    def show_state(self, state: ReplayState) -> None:
        self._state = state
        self.update(timeline(state, max(20, self.content_region.width or 78)))

    def on_resize(self) -> None:
        if self._state is not None:
            self.show_state(self._state)
