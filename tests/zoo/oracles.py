"""What must hold of a loop run under perftop, checked against the loop's own count of what
it did (tests/zoo/render.py) and against the same loop run plainly. Each oracle returns
its failures as lines; none is a pass."""

from __future__ import annotations

from typing import Any

from tests.zoo.parts import OPTIMIZED, Spec

# name -> what it checks
ORACLES = {
    "ran": "the loop ran to its end plainly and under perftop (exit 0, its own count written)",
    "same_result": "perftop changed nothing the loop computed (its parameters' checksum)",
    "steps": "perftop's step count is the loop's",
    "stack_depth": "the function-mode stack is as in the plain run at every step and at the end",
    "sampled_rate": "a sync line's sampled per_step within 3 stated errors of the loop's "
    "(a line of every step: seen in every watched step)",
    "exact_rate": "the exact mode (PERFTOP_SYNC=all) reads each sync line within ±25%",
    "host_line": "a line on host data only (a per-sample transform) is never reported",
    "eval_in_step": "an evaluation's or sampling pass's syncs are not booked as a step's",
    "between": "evaluations and checkpoints appear between steps, as many as the loop made",
    "wall_time": "perftop's wall time after the first step within 1.3x the plain loop's "
    "(steps of 1 ms or more)",
}
MIN_CALLS = 8  # a rate is checked against ±25% only when the loop made this many calls
SLOWDOWN = 1.3


def _rows(report: dict[str, Any], key: str = "sync_events") -> dict[int, dict[str, Any]]:
    return {r["line"]: r for r in report.get(key) or [] if r["file"].endswith("loop.py")}


def check(spec: Spec, plain: dict[str, Any], runs: dict[str, tuple[dict, dict]]) -> list[str]:
    """``runs``: mode (``sampled``, ``exact``) -> (the loop's own count, perftop's report).
    Failures as ``oracle: what``; the wall time is checked apart (:func:`slower`)."""
    out: list[str] = []
    for mode, (own, rep) in runs.items():
        out += [f"{o}: {mode}: {m}" for o, m in _common(spec, plain, own, rep)]
        if not spec.compiled:  # the detector steps aside under torch.compile
            rate = _sampled if mode == "sampled" else _exact
            out += [f"{o}: {mode}: {m}" for o, m in rate(own, rep)]
    return out


def _common(spec: Spec, plain: dict, own: dict, rep: dict) -> list[tuple[str, str]]:
    out = []
    if own["checksum"] != plain["checksum"]:
        out.append(("same_result", f"checksum {own['checksum']!r} != {plain['checksum']!r}"))
    if rep["steps"]["count"] != own["steps"]:
        out.append(("steps", f"perftop {rep['steps']['count']} != the loop's {own['steps']}"))
    out += _stack(own, plain, rep)
    for line in set(own["host_lines"]):
        for key in ("sync_events", "sync_between"):
            r = _rows(rep, key).get(line)
            if r:
                out.append(("host_line", f"line {line} ({r['op']}) reported in {key}"))
    if spec.update in OPTIMIZED:
        for line in _lone_pass_lines(own):
            r = _rows(rep).get(line)
            if r:
                out.append(("eval_in_step", f"line {line} ({r['op']}) booked {r['per_step']}/step"))
        out += _between(own, rep)
    return out


def _watched(rep: dict) -> int:
    return max((r.get("watched_steps") or 0 for r in rep.get("sync_events") or []), default=0)


def _stack(own: dict, plain: dict, rep: dict) -> list[tuple[str, str]]:
    """While a step is watched the detector's mode is on the stack (one more entry than the
    plain run's), and in the step before each watched stretch (primed: marks only, see
    ``Detector.prime``); never more, never on more steps than were watched, primed and
    waited for a safe point (two a stretch of watched steps), and never left there after
    the loop, unless the step after the last one was to be watched."""
    out = []
    extra = [a - b for a, b in zip(own["depth"], plain["depth"])]
    if own["depth_start"] != plain["depth_start"]:
        out.append(
            ("stack_depth", f"{own['depth_start']} at the start, plain {plain['depth_start']}")
        )
    if any(e not in (0, 1) for e in extra):
        i = next(i for i, e in enumerate(extra) if e not in (0, 1))
        out.append(("stack_depth", f"{own['depth'][i]} at step {i}, plain {plain['depth'][i]}"))
    on = sum(1 for e in extra if e == 1)
    if "_watched" in rep:  # from the recording: which steps, so how many stretches
        steps = rep["_watched"]
        watched = len(steps)
        runs = sum(1 for i, s in enumerate(steps) if i == 0 or steps[i - 1] != s - 1)
    else:
        runs = sum(1 for i, e in enumerate(extra) if e == 1 and (i == 0 or extra[i - 1] != 1))
        watched = _watched(rep) or (0 if rep.get("sync_events") else on)
    last_on = bool(extra) and extra[-1] == 1  # the step after the last: never closed
    # Each stretch of watched steps: its primed step before it, and one after it where
    # its last step ended inside the mode's own dispatch (a backward): the mode leaves at
    # the next module call (sync_stack's safe point), in the loop's next iteration.
    if on > watched + 2 * runs + last_on:
        out.append(
            ("stack_depth", f"the mode on after {on} steps, {watched} watched in {runs} stretches")
        )
    if own["depth_end"] - plain["depth_end"] != (1 if last_on else 0):
        out.append(("stack_depth", f"{own['depth_end']} at the end, plain {plain['depth_end']}"))
    return out


def _lone_pass_lines(own: dict) -> set[int]:
    """Lines of passes not right after a pass in the previous iteration (a region the
    previous step also began with is that loop's per-step work, by design: it stays in
    the step)."""
    iters = {i for i, *_ in own["passes"]}
    lines = {p[2] for p in own["passes"]}
    return lines - {p[2] for p in own["passes"] if p[0] - 1 in iters}


def _between(own: dict, rep: dict) -> list[tuple[str, str]]:
    """Each pass that follows a training step is an interval (passes in consecutive
    iterations: the later ones may stay in their step, by design); the last one may close
    with the job and be lost."""
    between = rep["steps"].get("between_s") or {}
    out = []
    iters = sorted({i for i, *_ in own["passes"]})
    lone = sum(1 for i in iters if i - 1 not in iters)
    most = len(own["passes"])
    got = (between.get("eval") or {}).get("count", 0)
    if iters and not lone - 1 <= got <= most:
        out.append(("between", f"{got} eval intervals, the loop made {lone} lone passes"))
    saves = len(own["checkpoints"])
    got = (between.get("checkpoint") or {}).get("count", 0)
    if saves and not saves - 1 <= got <= saves:
        out.append(("between", f"{got} checkpoint intervals, the loop saved {saves} times"))
    return out


def _truth(own: dict, line: str) -> tuple[float, int]:
    """The line's calls per watchable step (steps 1..N-1), and its calls."""
    return own["watchable"].get(line, 0) / max(1, own["steps"] - 1), own["calls"][line]


def _sampled(own: dict, rep: dict) -> list[tuple[str, str]]:
    out = []
    rows = _rows(rep)
    for line, period in own["periods"].items():
        truth, calls = _truth(own, line)
        r = rows.get(int(line))
        if r is None:  # steps 1-3 are always watched: a line of every step is seen there
            if period == 1:
                out.append(("sampled_rate", f"line {line} (every step) not reported"))
            continue
        err = r.get("per_step_error")
        if err is None or not r.get("watched_steps"):
            out.append(("sampled_rate", f"line {line}: no sampling error stated"))
            continue
        if period == 1 and r["seen_steps"] < r["watched_steps"] - 1:  # the first may miss it
            what = f"seen in {r['seen_steps']} of {r['watched_steps']} watched steps"
            out.append(("sampled_rate", f"line {line} (every step): {what}"))
        if abs(r["per_step"] - truth) > 3 * err + 0.05 * truth + 1 / own["steps"]:
            out.append(
                (
                    "sampled_rate",
                    f"line {line} ({r['op']}, period {period}): {r['per_step']} ±{err} over "
                    f"{r['watched_steps']} watched steps, the loop's {truth:.4f}",
                )
            )
    return out


def _exact(own: dict, rep: dict) -> list[tuple[str, str]]:
    out = []
    rows = _rows(rep)
    for line, period in own["periods"].items():
        truth, calls = _truth(own, line)
        r = rows.get(int(line))
        if r is None:
            if calls:
                out.append(("exact_rate", f"line {line} ({calls} calls) not reported"))
            continue
        if calls >= MIN_CALLS and abs(r["per_step"] - truth) > 0.25 * truth:
            what = f"{r['per_step']} over {r['watched_steps']} steps, the loop's {truth:.4f}"
            out.append(("exact_rate", f"line {line} ({r['op']}, period {period}): {what}"))
        if r.get("per_step_error") != 0:
            out.append(("exact_rate", f"line {line}: error {r.get('per_step_error')}, not 0"))
    return out


def slower(plain: dict[str, Any], own: dict[str, Any]) -> str | None:
    """The wall-time oracle's failure, or None (also for loops of steps under 1 ms). The
    first step is left out: its one-time start (a DataLoader worker's spawn, lazy init)
    is most of a short loop's time and swings with the machine's load, not a cost a step
    pays."""
    p, o = after_first(plain), after_first(own)
    if p / max(1, plain["steps"] - 1) < 1e-3:
        return None
    ratio = o / p
    if ratio <= SLOWDOWN:
        return None
    return (
        f"wall_time: {o:.3f} s under perftop after the first step, {p:.3f} s plain ({ratio:.2f}x)"
    )


def after_first(own: dict[str, Any]) -> float:
    return float(own["wall_s"] - own.get("first_s", 0.0))
