"""Time outside training steps through the model, the report and the Steps panel, from
events shaped as a real run sends them (a Between after the step it follows)."""

from __future__ import annotations

import dataclasses

from perftop.events import Between, BetweenOpen, Hello, Step
from perftop.model import Session
from perftop.report.build import build_report
from perftop.report.text import render
from perftop.tui.widgets.steps import GAP_MARK, between_line, chart


def _session() -> Session:
    s = Session()
    s.apply(Hello(100.0, 7, 1, "h", ("train.py",)))
    t = 100.0
    for i in range(6):
        s.apply(Step(7, i, t, t + 0.1, 0.01, 0.03, 0.02, None, "optimizer"))
        t += 0.1
        if i in (2, 5):  # an evaluation after steps 2 and 5, a checkpoint after 5
            s.apply(Between(7, "eval", t, 1.5))
            t += 1.5
            if i == 5:
                s.apply(Between(7, "checkpoint", t, 0.5))
                t += 0.5
    s.apply(Between(8, "eval", t, 9.0))  # another process's: not the primary's figures
    return s


def test_snapshot_report_and_text():
    snap = _session().snapshot(window=None)
    rows = {b.kind: b for b in snap.between}
    assert [b.kind for b in snap.between] == ["eval", "checkpoint"]
    assert rows["eval"].count == 2 and abs(rows["eval"].total_s - 3.0) < 1e-9
    assert rows["checkpoint"].count == 1 and rows["checkpoint"].last_t1 is not None
    r = build_report(snap)
    assert r["steps"]["between_s"] == {
        "eval": {"total_s": 3.0, "count": 2},
        "checkpoint": {"total_s": 0.5, "count": 1},
    }
    assert r["steps"]["step_time_s"]["max"] == 0.1  # the intervals are in no step
    assert "between steps (not in any step): eval 3.00s (2×), checkpoint 500ms (1×)" in render(r)


def test_steps_panel_marks_the_step_after_an_interval():
    snap = _session().snapshot()
    assert [row.gap_before for row in snap.steps.recent] == ["", "", "", "eval", "", ""]
    top = chart(snap.steps.recent, 6, 4, snap.steps.p50)[0].plain
    assert top[3] == GAP_MARK and top.count(GAP_MARK) == 1
    assert (
        between_line(snap.between).plain == "◆between steps: eval 3.00s (2×), checkpoint 500ms (1×)"
    )


def test_the_panel_names_the_kind_that_took_longest_first():
    """A narrow panel cuts the line's end: the kind with the most time comes first, whatever
    came first in the run (a one-off evaluation before 129 rollouts)."""
    s = _session()
    s.apply(Between(7, "rollout", 200.0, 4.0, site="collect_rollouts (algo.py:580)"))
    line = between_line(s.snapshot(window=None).between).plain
    assert line.startswith("◆between steps: rollout 4.00s (1×) in collect_rollouts (algo.py:580), ")
    assert line.endswith("eval 3.00s (2×), checkpoint 500ms (1×)")


def test_a_narrow_panel_keeps_every_kinds_figures_before_the_names():
    """An HF Trainer's evaluations were named by ``compute_loss (trainer.py:2172)``: at
    160x48 the Steps panel's 78 columns cut the checkpoints' figures off. Where the line
    is wider than the panel, the names follow all the figures."""
    s = _session()
    s.apply(Between(7, "eval", 200.0, 4.0, site="compute_loss (trainer.py:2172)"))
    wide = between_line(s.snapshot(window=None).between, 200).plain
    assert wide == ("◆between steps: eval 7.00s (3×) in compute_loss (trainer.py:2172), "
                    "checkpoint 500ms (1×)")  # fmt: skip
    narrow = between_line(s.snapshot(window=None).between, 78).plain
    assert narrow == ("◆between steps: eval 7.00s (3×), checkpoint 500ms (1×) · eval in "
                      "compute_loss (trainer.py:2172)")  # fmt: skip
    assert narrow.index("checkpoint 500ms") < 78
    # a collector's nodes: each node's row says whose it is
    rows = tuple(dataclasses.replace(r, host=f"n{i}") for i, r in
                 enumerate(s.snapshot(window=None).between))  # fmt: skip
    assert "eval 7.00s (3×) on n0" in between_line(rows).plain


def test_a_pass_named_by_the_jobs_code_reaches_the_panel_visibly():
    """A function or file name is the job's: a control character in it is written
    visibly (``^[``), never sent to the terminal."""
    s = _session()
    s.apply(Between(7, "rollout", 200.0, 4.0, site="roll\x1b]0;x\x07 (a.py:1)"))
    line = between_line(s.snapshot(window=None).between).plain
    assert "in roll^[]0;x^G (a.py:1)" in line and "\x1b" not in line


def test_no_interval_no_key():
    s = Session()
    s.apply(Step(7, 0, 1.0, 1.1, 0.0, 0.0, 0.0, None, "optimizer"))
    r = build_report(s.snapshot(window=None))
    assert r["steps"]["between_s"] == {} and "between steps" not in render(r)


def test_a_save_on_another_thread_is_not_called_time_between_steps():
    """An async checkpoint overlaps the steps (it cuts none): the report and the Steps
    panel name it as such, apart from the time no step was running."""
    s = _session()
    s.apply(Between(7, "checkpoint_overlapped", 100.2, 0.25))
    snap = s.snapshot(window=None)
    r = build_report(snap)
    assert r["steps"]["between_s"]["checkpoint_overlapped"] == {"total_s": 0.25, "count": 1}
    text = render(r)
    assert "between steps (not in any step): eval 3.00s (2×), checkpoint 500ms (1×)\n" in text
    assert "checkpoints on another thread, overlapping steps: 250ms (1×)" in text
    assert between_line(snap.between).plain.endswith("checkpoint overlapping steps 250ms (1×)")


def test_a_running_pass_is_what_its_end_says_it_was():
    """A pass is announced when it opens (``BetweenOpen``), as an evaluation until its
    forward calls are seen stepping an environment; its end names its kind: the running
    interval (the stall watch's ``during``) then reads ``rollout``, not ``eval``, for the
    rest of the run. An evaluation with a checkpoint in it stays an evaluation."""
    s = _session()
    s.apply(BetweenOpen(7, "eval", 200.0))
    assert s.snapshot().between_latest[0] == (7, "eval", 200.0, None)
    s.apply(Between(7, "rollout", 200.0, 2.0, "collect_rollouts (ppo.py:9)", 1.5))
    assert s.snapshot().between_latest[0] == (7, "rollout", 200.0, 202.0)
    s.apply(BetweenOpen(7, "eval", 210.0))
    s.apply(Between(7, "checkpoint", 210.5, 0.5))
    s.apply(Between(7, "eval", 211.0, 1.0))
    assert s.snapshot().between_latest[0] == (7, "eval", 210.0, 212.0)


def test_an_open_interval_ends_where_the_clock_was_set_back_while_it_ran():
    """The hook's stamps follow the system clock when it is set (Sender.retime): an
    evaluation opened at 300.0, then the clock set 2 s back, ends stamped 298.5. That is
    the open interval's end: it must not stay open (the stall watch would take every
    later stall for the evaluation's)."""
    s = _session()
    s.apply(BetweenOpen(7, "eval", 300.0))
    s.apply(Between(7, "eval", 298.5, 1.0))
    assert s.snapshot().between_latest[0] == (7, "eval", 298.5, 299.5)
    s.apply(Between(7, "checkpoint_overlapped", 280.0, 0.5))  # another thread's save
    assert s.snapshot().between_latest[0] == (7, "eval", 298.5, 299.5)
