"""What a capture's figures read as, in one line each: its steps, its cost, where it
stands. The Ops panel, the report, the TUI's notice, ``perftop trace`` and the hints all
say it with these words (the figures are :mod:`perftop.model.capture`'s)."""

from __future__ import annotations

from perftop.fmt import seconds, step_no
from perftop.model.capture import MONITOR_PID, Capture, CapturePart


def steps_text(first: int, n: int) -> str:
    """Steps ``first`` (an index from 0) and on, numbered as the user counts them."""
    first = step_no(first)
    return f"step {first}" if n == 1 else f"steps {first}–{first + n - 1}"


def cost_text(part: CapturePart) -> str:
    """What the capture cost a step: ``cost +3.2ms/step ±0.4ms (+6% on 20 steps before)``;
    N/A with the reason."""
    return cost_words(
        part.cost_s, part.before_s, part.before_n, part.after_s, part.after_n, part.cost_err_s
    )


def cost_words(
    cost_s: float | None,
    before_s: float | None,
    before_n: int = 0,
    after_s: float = 0.0,
    after_n: int = 0,
    err_s: float | None = None,
) -> str:
    """``cost +3.2ms/step ±0.4ms (+6% on 20 steps before; +0.21s in the 7 steps after
    it)``: the steps after, while its summary and trace were made, in all; ``err_s``, its
    standard error (:func:`cost_error`): a cost inside it is no cost that was measured
    (``-0.1ms/step ±2.5ms``: the steps moved by more than the capture did)."""
    if cost_s is None or not before_s:
        return "cost N/A (no steps before it to compare)"
    sign = "+" if cost_s >= 0 else "-"
    on = f" on {before_n} steps before" if before_n else ""
    if after_n:
        steps = "the step" if after_n == 1 else f"the {after_n} steps"
        a_sign = "+" if after_s >= 0 else "-"
        on += f"; {a_sign}{seconds(abs(after_s))} in {steps} after it"
    err = f" ±{seconds(err_s)}" if err_s is not None else ""
    return f"cost {sign}{seconds(abs(cost_s))}/step{err} ({cost_s / before_s:+.0%}{on})"


def part_status(p: CapturePart, asked_steps: int = 0) -> str:
    """Where a capture stands in one process, in one line (the Ops view's, the report's)."""
    if p.state == "done" and p.first_step >= 0:
        wait = "" if p.step_s is not None else ", its summary on the way…"
        return f"{steps_text(p.first_step, p.steps)} captured{wait}"
    if p.state == "started" and p.first_step >= 0:
        return f"capturing {steps_text(p.first_step, p.steps)}…"
    if p.state in ("refused", "failed"):
        return f"capture {p.state}: {p.reason or 'no reason given'}"
    n = asked_steps or p.steps
    return f"capture asked: the next {n} steps…" if n else "capture asked…"


def status_line(c: Capture) -> str:
    """Where a capture stands as a whole: its first process's line (with its pid where
    several answered)."""
    parts = c.shown_parts()
    if not parts:
        return part_status(CapturePart(MONITOR_PID, "asked", c.t), c.steps)
    p = parts[0]
    who = f" (pid {p.pid})" if p.pid and len(parts) > 1 else ""
    return part_status(p, c.steps) + who
