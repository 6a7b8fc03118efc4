"""Steps: throughput, percentiles and a stacked chart of recent step times by phase."""

from __future__ import annotations

from bisect import bisect_left
from math import ceil, log2

from rich.console import Group, RenderableType
from rich.text import Text

from perftop.model import Snapshot
from perftop.model.between import OVERLAPPED
from perftop.model.snapshot import PHASES, BetweenRow, StepRow, StepStats
from perftop.model.steps import overall_differs
from perftop.model.trainers import rate_together, whose
from perftop.safe import visible_line
from perftop.tui import fmt
from perftop.tui.widgets.lines import Runs
from perftop.tui.widgets.panel import TextPanel

STALL_FACTOR = 3.0  # a step this many times the median stands out: a "slow step" (a
# "stall" is the stall capture's: 5x the median and 2 s, perftop/monitor/stall.py)
EIGHTHS = " ▁▂▃▄▅▆▇█"
GAP_MARK, GAP_STYLE = "◆", "bold magenta"  # time outside training steps before this step


def _phases(row: StepRow) -> tuple[float, float, float, float]:
    return (row.data, row.other, row.backward, row.optimizer)


Column = tuple[tuple[str, str], ...]  # a step's cells, top line first


def chart(
    rows: tuple[StepRow, ...],
    width: int,
    height: int,
    p50: float | None,
    kept: dict[object, Column] | None = None,
) -> list[Runs]:
    """Stacked bars, one column per step, newest on the right; phases bottom-up in
    ``PHASES`` order. Bars above the scale are clipped and a slow step gets a red ``▲``.
    Each line is its runs of one style (drawn straight to strips, see ``lines``).
    ``kept``: the columns of the last chart, by step, reused while the scale holds (most
    snapshots: only the steps that came since are placed) and replaced by this one's."""
    rows = rows[-width:]
    if not rows or height <= 0:
        return [Runs(((" " * width, ""),)) for _ in range(max(0, height))]
    durs = sorted(r.duration for r in rows)
    top = _scale(durs[min(len(durs) - 1, int(0.95 * len(durs)))] * 1.25)
    stall = (p50 or durs[len(durs) // 2]) * STALL_FACTOR
    old = kept if kept is not None else {}
    new: dict[object, Column] = {}
    cols: list[Column] = []
    for row in rows:
        slow = row.duration >= stall
        key = (row, top, height, slow)  # a new scale misses every column kept
        col = old.get(key) or new.get(key)
        if col is None:
            col = _column(row, top, height, slow)
        new[key] = col
        cols.append(col)
    if kept is not None:
        kept.clear()
        kept.update(new)
    pad = [BLANK] * (width - len(rows))
    return [_runs(pad + [col[y] for col in cols]) for y in range(height)]


BLANK = (" ", "")
SCALE_STEPS = 8  # scales per doubling: each 2^(1/8) (9%) above the last


def _scale(top: float) -> float:
    """``top`` rounded up to the next of a ladder of scales 9% apart: the p95 of a noisy
    window moves by a few percent at each snapshot, and each move was a new scale, every
    column placed anew (the chart has no axis: its bars keep their proportions)."""
    if not top > 1e-9:
        return 1e-9
    return float(2.0 ** (ceil(log2(top) * SCALE_STEPS) / SCALE_STEPS))


def _column(row: StepRow, top: float, height: int, slow: bool) -> Column:
    cells = [BLANK] * height  # cells[height - 1] is the bottom cell
    total_cells = min(row.duration, top) / top * height
    bounds, acc = [], 0.0
    for part in _phases(row):
        acc += part
        bounds.append(min(acc, top) / top * height)
    last = len(PHASES) - 1
    for y in range(min(height, ceil(total_cells))):  # y = 0 is the bottom cell
        fill = total_cells - y
        k = min(bisect_left(bounds, y + min(fill, 1.0) / 2), last)  # the phase at mid-cell
        ch = "█" if fill >= 1 else EIGHTHS[max(1, round(fill * 8))]
        cells[height - 1 - y] = (ch, PHASE_CELL_STYLES[k])
    if slow:
        cells[0] = ("▲", "bold red")
    elif row.gap_before:
        cells[0] = (GAP_MARK, GAP_STYLE)
    return tuple(cells)


PHASE_CELL_STYLES = tuple(fmt.PHASE_STYLES[p] for p in PHASES)


def _runs(cells: list[tuple[str, str]]) -> Runs:
    """One run per style, cheaper to build and to draw; a blank cell joins the run on its
    left, since a space shows no foreground colour (the phases' styles are colours only):
    a line of bars with gaps is a run or two, not one per cell."""
    runs: list[tuple[str, str]] = []
    text: list[str] = []
    style: str | None = None  # the run's; None while only blanks lead the line
    for ch, st in cells:
        if ch != " " and st != style:
            if text and (style is not None or st):  # leading blanks are unstyled
                runs.append(("".join(text), style or ""))
                text = []
            style = st
        text.append(ch)
    if text:
        runs.append(("".join(text), style or ""))
    return Runs(runs)


def stats_line(s: StepStats, compact: bool = False, trainers: tuple[StepStats, ...] = ()) -> Text:
    """Count, rate and percentiles; ``compact`` drops max and GPU to fit 40 columns.
    ``trainers``: several trainers without ranks: the count is their total, the rate that
    of those that step together with the one shown (hogwild: all of them; a sweep's
    trials, one after another: the one training now), the times that one's (each one's
    under Ranks)."""
    gap = " " if compact else "  "
    t = Text()
    t.append("steps ", style="dim")
    count, rate = s.count, s.steps_per_s
    if trainers:
        count = sum(r.count for r in trainers)
        rate = rate_together(s, trainers)
    t.append(f"{count:,}", style="bold")
    if trainers:
        t.append(f" in {len(trainers)} trainers", style="dim")
        if not compact:
            t.append(" (" + " + ".join(f"{r.count:,}" for r in trainers) + ")", style="dim")
    t.append(gap)
    t.append(fmt.num(rate, "{:.1f}") + "/s", style="bold")
    wall = s.wall_steps_per_s
    if not trainers and not compact and overall_differs(rate, wall):
        t.append(f" ({fmt.num(wall, '{:.1f}')}/s overall)", style="dim")
    if trainers and not compact:
        t.append(f"{gap}{whose(s.pid, [r.pid for r in trainers])}", style="dim")
    shown = (("p50", s.p50), ("p95", s.p95)) + (() if compact else (("max", s.max),))
    for label, v in shown:
        t.append(f"{gap}{label} ", style="dim")
        style = "red" if label == "max" and _stalled(s) else None
        t.append(fmt.secs(v), style=fmt.NA_STYLE if v is None else style)
    if s.gpu_p50 is not None and not compact:
        t.append("  gpu ", style="dim")
        t.append(fmt.secs(s.gpu_p50))
    return t


def _stalled(s: StepStats) -> bool:
    return s.max is not None and s.p50 is not None and s.max >= STALL_FACTOR * s.p50


def phase_line(s: StepStats) -> Text:
    t = Text()
    dw = s.data_wait_fraction
    t.append("data wait ", style="dim")
    t.append(fmt.pct(None if dw is None else dw * 100), style=fmt.level_style(dw, 0.15, 0.3))
    if s.data_wait_source == "before_forward":
        t.append(" before forward", style="dim")  # a feeder's: no DataLoader on this thread
    for p in PHASES:
        v = s.phase_p50.get(p)
        t.append("  ")
        t.append("■", style=fmt.PHASE_STYLES[p])
        t.append(f"{fmt.PHASE_SHORT[p]} ", style="dim")
        t.append(fmt.secs(v), style=fmt.NA_STYLE if v is None else None)
    return t


def legend(s: StepStats, gaps: bool = False) -> Text:
    t = Text()
    for p in PHASES:
        t.append("■", style=fmt.PHASE_STYLES[p])
        t.append(fmt.PHASE_SHORT[p] + " ", style="dim")
    t.append("▲", style="bold red")
    t.append(f"slow ≥{STALL_FACTOR:g}×p50", style="dim")
    if gaps:
        t.append(" " + GAP_MARK, style=GAP_STYLE)
        t.append("after time between steps", style="dim")
    return t


SITE_W = 48  # a pass's function, as much of it as the line shows


def between_line(rows: tuple[BetweenRow, ...], width: int | None = None) -> Text:
    """Time outside training steps, by kind: ``between steps: eval 12.3s (4×), …``. The
    kind that took the most time first, so a narrow panel cuts the least of it (SAC's
    rollouts, named, after a one-off evaluation of 1 ms); saves overlapping steps last.
    Each kind's function follows its figures; where that is wider than ``width``, the
    functions follow all the figures (an HF Trainer's evaluation, named by a long
    function, cut its checkpoints' figures off)."""
    ordered = sorted(rows, key=lambda r: (r.kind == OVERLAPPED, -r.total_s))
    t = _between(ordered, names_last=False)
    if width is not None and t.cell_len > width:
        t = _between(ordered, names_last=True)
    return t


def _between(ordered: list[BetweenRow], names_last: bool) -> Text:
    t = Text()
    t.append(GAP_MARK, style=GAP_STYLE)
    t.append("between steps: ", style="dim")
    for i, r in enumerate(ordered):
        if i:
            t.append(", ")
        t.append("checkpoint overlapping steps " if r.kind == OVERLAPPED else f"{r.kind} ")
        t.append(fmt.secs(r.total_s), style="bold")
        t.append(f" ({r.count}×)", style="dim")
        if r.host:  # a collector's nodes: each node's own row
            t.append(f" on {visible_line(r.host)}", style="dim")
        if r.site and not names_last:  # the user's function that made the pass's calls
            t.append(f" in {site_text(r.site)}", style="dim")
    if names_last:
        for r in ordered:
            if r.site:
                t.append(f" · {r.kind} in {site_text(r.site)}", style="dim")
    return t


def site_text(site: str, width: int = SITE_W) -> str:
    """A pass's ``function (path:line)`` in ``width`` cells: a long path (a library's, from
    its package's folder) loses its first folders, so the file and line stay
    (``collect_rollouts (…/on_policy_algorithm.py:218)``)."""
    site = visible_line(site)
    if len(site) <= width:
        return site
    name, sep, where = site.partition(" (")
    keep = width - len(name) - len(sep) - 1  # the rest of the path, after an ellipsis
    if not sep or not where.endswith(")") or keep < 12:
        return site[: width - 1] + "…"
    tail = where[-keep:]
    return f"{name}{sep}…{tail[tail.find('/') :] if '/' in tail else tail}"


class StepsPanel(TextPanel):
    TITLE = "Steps"
    DEFAULT_CSS = "StepsPanel { min-height: 5; }"

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._columns: dict[object, Column] = {}  # the chart's last columns (see chart)

    def render_body(self, snap: Snapshot) -> RenderableType:
        s = snap.steps
        w = self.body_width
        h = max(1, self.content_region.height or 6)
        if s.count == 0:
            over = snap.meta.ended or snap.meta.exit_code is not None
            msg = "the job ended before its first training step"
            if not over:
                msg = "waiting for the first training step…"
            if snap.meta.observer:
                msg = "observer mode: no hook in this process, so no steps (see Stacks)"
            elif not snap.trainers:
                msg = "no training process connected" + (
                    " before the job ended" if over else " yet"
                )
            return Text(msg, style="dim")
        head = [stats_line(s, self.compact, snap.independent_trainers())]
        if h >= 5:
            head.append(phase_line(s))
        if h >= 7 and snap.between:
            head.append(between_line(snap.between, w))
        chart_h = max(1, h - len(head) - 1)
        lines = chart(s.recent, w, chart_h, s.p50, self._columns)
        gaps = any(r.gap_before for r in s.recent[-w:])
        return Group(*head, *lines, legend(s, gaps))
