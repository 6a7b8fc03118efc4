"""Hints: what perftop thinks slows the job down, most at stake first, each with its
measured evidence, what to try, and the panel that proves it (``e`` jumps there).

Every hint's title is shown; the space left goes to the evidence and advice of the most
important ones first. Lines wrap, with a hanging indent, so what is shown reads in full.
Warnings about the monitoring itself follow the hints."""

from __future__ import annotations

import functools
import textwrap

from rich.console import Group, RenderableType
from rich.text import Text

from perftop.hints.base import MIN_STEPS
from perftop.model import Snapshot
from perftop.model.notes import grouped, sources_text
from perftop.model.snapshot import Hint
from perftop.safe import visible_line
from perftop.tui.widgets.panel import TextPanel

LEVEL_STYLES = {"error": "bold red", "warning": "yellow", "info": "cyan"}
SEVERITY_STYLES = {"high": "bold red", "medium": "yellow", "info": "cyan"}
PANEL_NAMES = {"steps": "Steps", "gpu": "GPU", "host": "Host", "procs": "Processes", "sync": "Sync"}


@functools.lru_cache(maxsize=256)
def _wrapped(body: str, room: int, then: int) -> tuple[str, ...]:
    """``body``'s lines: the first ``room`` wide, the others ``then``. Kept: a hint's title
    and advice read the same at every snapshot (only figures in its evidence move):
    wrapping them again was half the panel's time (the demo's 3 hints: 650 -> 300 us)."""
    body = visible_line(body)  # a hint names the job's files, functions and datasets
    parts = textwrap.wrap(body, room, break_on_hyphens=False) or [""]
    rest = " ".join(parts[1:])
    return (parts[0], *(textwrap.wrap(rest, then, break_on_hyphens=False) if rest else ()))


def wrap(first: Text, body: str, width: int, indent: int, style: str = "") -> list[Text]:
    """``first`` then ``body``, wrapped at ``width`` with continuation lines indented by
    ``indent``: evidence and advice read in full, never cut with an ellipsis."""
    head, *more = _wrapped(body, max(10, width - first.cell_len), max(10, width - indent))
    out = [first + Text(head, style=style)]
    out += [Text(" " * indent + part, style=style) for part in more]
    for t in out:
        t.no_wrap, t.overflow = True, "fold"
    return out


def title_lines(h: Hint, index: int, width: int) -> list[Text]:
    t = Text(f"{index}. ", style="dim")
    t.append(f"{h.severity.upper()} ", style=SEVERITY_STYLES.get(h.severity, "yellow"))
    title = h.title + ("" if h.seen_live else "  (whole-run\u00a0verdict)")
    title += f"  →\u00a0{PANEL_NAMES[h.panel]}" if h.panel in PANEL_NAMES else ""
    lines = wrap(t, title, width, len(f"{index}. "), "bold")
    if h.panel in PANEL_NAMES:  # the panel that proves it, dim, on the last line
        last = lines[-1]
        cut = last.plain.rfind("→")
        if cut >= 0:
            last.stylize("dim", cut)
    return lines


def detail_lines(h: Hint, room: int, width: int = 10_000) -> list[Text]:
    """Up to ``room`` lines of evidence and advice, each wrapped in full: when they do not
    all fit, the first evidence and the first advice come before the rest, shown in
    reading order; an item that does not fit whole is left out, but for the first advice:
    as many of its lines as fit, the last cut with "…" (zoomed, all of it), and nothing
    after it (a later, lesser advice shown in its place would read as the one to try)."""
    items: list[tuple[int, list[Text]]] = []  # (priority, lines) in reading order
    for i, e in enumerate(h.evidence):
        items.append((0 if i == 0 else 2 + i, wrap(Text("   "), e, width, 3)))
    if h.est_gain_text:
        gain = wrap(Text("   at stake: ", style="dim"), h.est_gain_text, width, 5, "dim")
        items.append((50, gain))
    for i, a in enumerate(h.advice):
        items.append((1 if i == 0 else 60 + i, wrap(Text("   try: ", style="green"), a, width, 8)))
    keep: dict[int, list[Text]] = {}
    for p, lines in sorted(items, key=lambda x: x[0]):
        if len(lines) <= room:
            keep[p] = lines
            room -= len(lines)
        elif p == 1:  # the first advice
            if room > 0:
                keep[p] = [*lines[: room - 1], _cut(lines[room - 1], width)]
            break
    return [t for p, _ in items if p in keep for t in keep[p]]


def _cut(line: Text, width: int) -> Text:
    """``line`` ending in "…": more of it follows, out of the room (zoomed, shown)."""
    t = line.copy()
    t.rstrip()
    if t.cell_len > width - 2:
        t.truncate(max(0, width - 2))
        space = t.plain.rfind(" ")
        if space > len(t.plain) // 2:  # at a word's end, not inside the word
            t.right_crop(len(t.plain) - space)
            t.rstrip()
    t.append(" …", style="dim")
    return t


class HintsPanel(TextPanel):
    TITLE = "Hints"
    # zoomed, every line of every hint is shown: what does not fit scrolls (arrows, wheel)
    DEFAULT_CSS = """
    HintsPanel { overflow-y: auto; scrollbar-size-vertical: 1; scrollbar-gutter: stable; }
    """
    KEEP_HEIGHT = False  # blank lines would scroll

    @property
    def body_width(self) -> int:
        """The width left of the scrollbar's column (always kept: lines are wrapped before
        anyone knows whether they will scroll, and the bar would hide their last letter)."""
        return max(10, self.scrollable_content_region.width or self.size.width or 40)

    _drawn: tuple[object, ...] | None = None  # what the body was last drawn from

    def show(self, snap: Snapshot) -> None:
        """Like every text panel, but the lines come wrapped already (no ellipsis). Hints
        and notes equal to the last ones, in the same room, are not wrapped again."""
        self._last = snap
        height = self.content_region.height if self.is_attached else 0
        shown = tuple(
            (h.severity, h.title, h.seen_live, h.panel, h.evidence, h.est_gain_text, h.advice)
            for h in snap.hints
        )  # what the lines say: est_gain, since_t... move at each evaluation
        empty = "" if snap.hints else empty_text(snap)  # (its step count, while too few)
        key = (shown, _notes(snap), empty, self.body_width, height, self.zoomed, self.compact)
        if key != self._drawn:
            self._drawn = key
            self._body.update(self.render_body(snap))

    def render_body(self, snap: Snapshot) -> RenderableType:
        hints = snap.hints
        notes = _notes(snap)
        self.border_subtitle = "e: show the proof" if hints else ""
        width = self.body_width
        if not hints and not notes:
            return Text(empty_text(snap), style="dim")
        first = [Text(empty_text(snap), style="dim")] if not hints and snap.meta.observer else []
        height = self.content_region.height if self.is_attached else 0
        titles = [title_lines(h, i + 1, width) for i, h in enumerate(hints)]
        note_lines = [note_line(n, width) for n in notes]
        used = sum(len(t) for t in titles) + sum(len(n) for n in note_lines)
        room = 10_000 if self.zoomed or not height else height - used
        lines: list[Text] = first
        for h, title in zip(hints, titles):
            lines.extend(title)
            more = [] if self.compact else detail_lines(h, room, width)
            room -= len(more)
            lines.extend(more)
        for n in note_lines:
            lines.extend(n)
        return Group(*lines)


def _notes(snap: Snapshot) -> list[tuple[str, str, tuple[str, ...]]]:
    """The last warnings and errors about the monitoring itself, shown below the hints:
    ``(level, text, sources)``, one for a note several processes said alike."""
    said = ((n.level, n.source, n.text) for n in snap.notes if n.level in ("warning", "error"))
    return grouped(said)[-5:]


def empty_text(snap: Snapshot) -> str:
    if snap.meta.observer:
        return (
            "no hints in observer mode: hints need the hook's step timings "
            "(perftop run, or attach to a job started under perftop)"
        )
    n = snap.steps.count
    steps = f"{n} step{'' if n == 1 else 's'}"
    if snap.meta.ended or snap.meta.exit_code is not None:  # over: no "yet", no "so far"
        if n < MIN_STEPS:
            return f"no hints: the job made {steps} (the step rules need {MIN_STEPS})"
        return "no hints: nothing found that slowed this job down"
    if n < MIN_STEPS:  # too soon to judge: not "nothing found"
        return f"no hints yet: {steps} so far (the step rules wait for {MIN_STEPS})"
    return "no hints yet: nothing found that slows this job down"


def note_line(note: tuple[str, str, tuple[str, ...]], width: int) -> list[Text]:
    level, text, sources = note
    first = Text("! ", style=LEVEL_STYLES.get(level, "yellow"))
    return wrap(first, f"{text}  ({sources_text(sources)})", width, 2)
