"""The replay status line: playing or paused, speed, position in time, steps and events,
and the replay's own keys."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from perftop.replay.controller import ReplayState

KEYS = "space play  [ ] speed  a fastest  , . event  < > 1 s  g go to  n slow  b between  h hint"


def speed_label(state: ReplayState) -> str:
    if state.fast:
        return "fastest"
    return f"{state.speed:g}×"


def status_line(state: ReplayState) -> Text:
    t = Text()
    if state.at_end:
        t.append(" END ", style="bold black on white")
    elif state.playing:
        t.append(" ▶ PLAY ", style="bold black on green")
    else:
        t.append(" ❚❚ PAUSED ", style="bold black on yellow")
    t.append(f" {speed_label(state)}", style="bold")
    t.append("  step ", style="dim")
    total = f"/{state.steps_total:,}" if state.index_done else ""
    t.append(f"{state.step:,}{total}")
    t.append("  event ", style="dim")
    total = f"/{state.events_total:,}" if state.index_done else ""
    t.append(f"{state.event:,}{total}")
    if state.busy:
        t.append(f"  {state.busy}", style="yellow")
    t.append("   " + KEYS, style="dim")
    t.no_wrap, t.overflow = True, "ellipsis"
    return t


class ReplayBar(Static):
    DEFAULT_CSS = """
    ReplayBar { height: 1; padding: 0 1; background: $panel; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__("", id=id, markup=False)

    def show_state(self, state: ReplayState) -> None:
        self.update(status_line(state))
