"""Stacks: the latest stalled step with what every process was doing, and, in observer
mode, where each sampled process spends its time."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.text import Text

from perftop.fmt import held_words, stall_words
from perftop.model import Snapshot
from perftop.model.comm_rows import rank_name
from perftop.model.roles import role_of_pid
from perftop.model.stacks import after_last_step, is_library, short, where
from perftop.model.stands import first_stack, held
from perftop.safe import visible_line
from perftop.tui import fmt
from perftop.tui.widgets.panel import TextPanel

FRAMES = 6


class StacksPanel(TextPanel):
    TITLE = "Stacks"

    def render_body(self, snap: Snapshot) -> RenderableType:
        lines: list[Text] = []
        if snap.stalls:
            lines += self._stall(snap)
        for r in snap.stacks:
            head = Text(f"{r.role:<7}", style="bold")
            head.append(f" {r.pid:>7}  ")
            head.append(f"{r.samples} samples", style="dim")
            lines.append(head)
            for what, share in r.where[: 2 if self.compact else 4]:
                line = Text(f"  {share:>4.0%}  ", style="bold")
                line.append(visible_line(what))
                lines.append(line)
        for n in snap.notes:
            if n.source in ("stacks", "observer"):
                lines.append(
                    Text(visible_line(n.text), style="yellow" if n.level == "warning" else "dim")
                )
        if not lines:
            text = "no stall so far (a step over 5× the median and 2 s gets its stacks here)"
            if snap.meta.observer:
                text = "sampling stacks with py-spy…"
            lines.append(Text(text, style=fmt.NA_STYLE))
        return Group(*lines)

    def _stall(self, snap: Snapshot) -> list[Text]:
        s = snap.stalls[-1]
        tail = after_last_step(snap, s)
        what, how = stall_words(s.step, s.pid, s.stalled_s, s.median_s, s.during, tail)
        label = "hang" if s.during else ("no step" if tail else "stall")
        sep = ": " if tail else " "  # "step 61 of pid N stalled …", "… of pid N: no step in …"
        title = Text(f"{label}: {what}{sep}", style="bold red" if tail is None else "bold")
        title.append(
            how + (f"  · {len(snap.stalls)} stalls" if len(snap.stalls) > 1 else ""),
            style="red" if tail is None else "",
        )
        out = [title, *self._missing(snap, s.during)]
        for pid, role, frames in s.stacks:
            head = Text(f"{role_of_pid(snap, pid, role, s.host):<8} {pid:>7}  ", style="bold")
            out += _held(head, s.state_of(pid), pid, where(frames))
            for f in frames[: 2 if self.compact else FRAMES]:
                out.append(
                    Text("    " + visible_line(short(f)), style="dim" if is_library(f[1]) else "")
                )
            if not frames:
                out.append(Text("    no Python frame", style=fmt.NA_STYLE))
        if s.note:
            out.append(Text(visible_line(s.note), style="yellow"))
        return out

    def _missing(self, snap: Snapshot, during: str) -> list[Text]:
        """A hung collective: first, each rank that never entered it, with the stack its own
        perftop dumped (under ``collect``, the latest capture may be another node's)."""
        h = next((h for h in reversed(snap.comm.hangs) if not h.desync and h.missing), None)
        if h is None or during != "collective":
            return []
        out = [Text(f"never entered {h.op} {h.pg} seq {h.seq}:", style="bold red")]
        for r in h.missing:
            frames, why = first_stack(snap, r.pid, h.t_created, r.host)
            who = rank_name(r.rank, r.pid)
            head = Text(f"{who:<8} {r.pid:>7}{' ' + r.host if r.host else ''}  ", "bold")
            state = held(snap, r.pid, h.t_created, r.host)
            out += _held(head, state, r.pid, where(frames) if frames else why or "no stack yet")
            for f in frames[: 2 if self.compact else FRAMES]:
                out.append(
                    Text("    " + visible_line(short(f)), style="dim" if is_library(f[1]) else "")
                )
        return out


def _held(head: Text, state: str, pid: int, place: str) -> list[Text]:
    """A process's line, ``head`` then where it stands; one held there says so before its
    place (seen however narrow the screen) and, on a line of its own, what that means."""
    if state:
        head.append(f"[{state}] ", style="bold yellow")
    head.append(visible_line(place), style="cyan")
    if not state:
        return [head]
    return [head, Text(f"    {held_words(state, pid)}", style="yellow")]
