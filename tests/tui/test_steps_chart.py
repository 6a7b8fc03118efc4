"""The Steps chart's lines: each cell as the chart places it, in as few runs as a terminal
can draw it identically. A blank cell joins the run on its left (a space shows no
foreground colour), so the screen is the same cell for cell and a line of bars with gaps is
a run or two, not one per cell."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from rich.style import Style

from perftop.model.snapshot import StepRow
from perftop.tui.widgets.steps import SITE_W, _runs, chart, site_text

CELLS = st.lists(
    st.tuples(st.sampled_from([" ", "█", "▄", "▲"]), st.sampled_from(["", "yellow", "green3"])),
    max_size=40,
)


@given(CELLS)
def test_runs_draw_each_cell_as_placed(cells):
    runs = _runs(cells)
    assert runs.plain == "".join(ch for ch, _ in cells)
    drawn = [(ch, style) for text, style in runs for ch in text]
    for (ch, placed), (_, got) in zip(cells, drawn, strict=True):
        assert got == placed or ch == " "  # a glyph keeps its style; a blank may take any
    assert all(a[1] != b[1] for a, b in zip(runs, runs[1:]))  # no two runs alike in a row
    assert all(not text.startswith(" ") for text, _ in runs[1:])  # blanks join the left run


@settings(max_examples=50)
@given(
    st.lists(
        st.tuples(st.floats(0.0, 0.05), st.floats(0.0, 0.05), st.floats(0.0, 0.05)),
        min_size=1,
        max_size=60,
    ),
    st.integers(1, 12),
)
def test_the_chart_uses_styles_that_show_nothing_on_a_blank(phases, height):
    """What lets a blank take its neighbour's style: no chart style has a background, an
    underline, a reverse or a strike (each would show on a space)."""
    rows, t = [], 0.0
    for i, (data, fwd, bwd) in enumerate(phases):
        d = data + fwd + bwd + 1e-4
        rows.append(StepRow(1, i, t, t + d, data, bwd, 1e-4, fwd, None))
        t += d
    lines = chart(tuple(rows), 60, height, None)
    assert len(lines) == height
    for line in lines:
        assert len(line.plain) == 60
        for _, style in line:
            s = Style.parse(style) if style else Style()
            assert not (s.bgcolor or s.underline or s.reverse or s.strike or s.overline)


@settings(max_examples=60)
@given(
    st.lists(
        st.tuples(st.floats(0.0, 0.05), st.floats(0.0, 0.05), st.sampled_from(["", "eval"])),
        min_size=1,
        max_size=90,
    ),
    st.integers(1, 10),
    st.integers(1, 9),
)
def test_a_chart_drawn_from_the_last_ones_columns_is_the_chart_drawn_afresh(steps, height, by):
    """The columns kept from one chart to the next (the screen's refresh) draw what a
    chart drawn from nothing draws, as the window slides by ``by`` steps at a time, its
    scale changing or not."""
    rows, t = [], 0.0
    for i, (data, fwd, gap) in enumerate(steps):
        d = data + fwd + 1e-4
        rows.append(StepRow(1, i, t, t + d, data, 1e-4, 0.0, fwd, None, gap))
        t += d
    kept: dict = {}
    for end in range(1, len(rows) + 1, by):
        window = tuple(rows[:end])
        assert chart(window, 30, height, None, kept) == chart(window, 30, height, None)


def test_columns_are_kept_while_the_scale_holds():
    rows = [
        StepRow(1, i, i * 0.01, i * 0.01 + 0.008, 0.002, 0.003, 0.001, 0.002) for i in range(50)
    ]
    kept: dict = {}
    chart(tuple(rows[:40]), 30, 6, None, kept)
    before = dict(kept)
    chart(tuple(rows[:45]), 30, 6, None, kept)
    assert sum(v is before.get(k) for k, v in kept.items()) >= 25  # the 25 steps still shown


def test_a_pass_named_in_a_librarys_file_keeps_its_file_and_line_where_cut() -> None:
    """A pass's site names a library's file from its package's folder (one file: ignite's
    ``__init__.py`` was one of many); where that is too long for the Steps line, the first
    folders go, never the file or the line (a cut at the right dropped them)."""
    sb3 = "collect_rollouts (stable_baselines3/common/on_policy_algorithm.py:218)"
    assert site_text(sb3) == "collect_rollouts (…/on_policy_algorithm.py:218)"
    assert len(site_text(sb3)) <= SITE_W
    short = "evaluate_step (ignite/engine/__init__.py:689)"
    assert site_text(short) == short
    # no path to cut, or a function name that leaves no room: cut at the right, said so
    assert site_text("f" * 60) == "f" * (SITE_W - 1) + "…"
    long_name = "g" * 40 + " (a/b.py:1)"
    assert site_text(long_name) == long_name[: SITE_W - 1] + "…"
    # a hostile name is shown escaped, as every string from the job
    assert "\x1b" not in site_text("roll\x1b]0;x\x07 (a.py:1)")


def test_a_scale_that_moves_a_little_keeps_the_columns_placed():
    """The p95 of a window moves a little at each refresh; on a ladder of scales 9% apart
    the chart keeps its columns (each placed once, not anew at every refresh), its bars in
    their proportions to within that step."""
    rows, t = [], 0.0
    for i in range(61):
        d = 0.010 + 0.00002 * i  # each step a little slower: the window's p95 rises by one
        rows.append(StepRow(1, i, t, t + d, 0.002, 0.003, 0.001, d - 0.006, None))
        t += d
    kept: dict = {}
    chart(tuple(rows[:60]), 60, 8, None, kept)
    before = set(map(id, kept.values()))
    chart(tuple(rows[1:]), 60, 8, None, kept)  # the next refresh: one step on
    assert len(before & set(map(id, kept.values()))) == 59
