"""Issue 30's oracles: every second of a loop accounted for, against the loop's own timers
(tests/zoo/render.py). Each evaluation, sampling pass and checkpoint is one interval
between steps, as long as the loop timed it; no stall is reported where the loop had none;
the data wait is what the loop timed around its batch fetches, whatever fed them.

They read perftop's report and the trainer's timeline from the recording (its steps and
intervals, kept as ``<mode>.events.json`` by tests/zoo/run.py)."""

from __future__ import annotations

from typing import Any

from tests.zoo.parts import Spec

ACCOUNTING = {
    "passes": "each evaluation, sampling pass, rollout and checkpoint is one interval between "
    "steps, of its kind (a rollout's is rollout), "
    "its time within 10% (+0.5 ms) of the loop's own timer; a pass with grad off may run "
    "longer, to the loop's next training activity (docs/steps.md: its end is seen there), "
    "never into the step after it, nor into the idle after the last step",
    "stalls": "no stalled step where the loop had none (a hang only of a pass that long)",
    "data_wait": "data wait measured (not N/A) as the data asks (a DataLoader's fetch, or a "
    "feeder's time blocked before the forwards), within 10% (or 2 ms, 50 us a step) of the "
    "loop's own timers around its batch fetches (time blocked behind a feeder), steps 1..N-1",
}
# Data a DataLoader fetches on the training thread (a prefetcher class calls its next()
# there): its data wait is the fetch's; any other is a feeder's (first_forward.py).
LOADER_ON_TRAINING_THREAD = frozenset({"loader0", "loader1", "prefetch_loader"})
SHARE = 0.10  # of the loop's own time
PASS_SLACK_S = 5e-4  # a pass: where the loop's timer and perftop's interval begin and end
DATA_SLACK_S = 2e-3  # the data wait over the whole run ...
FETCH_SLACK_S = (
    5e-5  # ... or this a fetch (a step): the loop's timer and perftop's hooks are not at
)
# the same instructions (a call, a hook's own time, a preemption under load between them)
HANG_S = 2.0  # a pass this long may be captured as hanging (perftop/monitor/stall.py)
OVERLAP_S = 1e-4  # an interval and a step may touch, not overlap
TAIL_S = 0.05  # the loop's code after its last pass (its count written) before it idles


def account(spec: Spec, own: dict[str, Any], rep: dict[str, Any], tl: dict[str, Any]) -> list[str]:
    """Failures as ``oracle: what``; ``tl``: the trainer's timeline (run.timeline);"""
    out = [f"passes: {m}" for m in _passes(own, tl, spec.compiled, spec.rollout_eval)]
    out += [f"passes: {m}" for m in _idle_after(spec, own, tl)]
    out += [f"stalls: {m}" for m in _stalls(own, rep, spec.compiled, spec.idle_s > 0)]
    out += [f"data_wait: {m}" for m in _data_wait(spec, own, rep, tl)]
    return out


def _passes(
    own: dict[str, Any], tl: dict[str, Any], compiled: bool = False, apart: bool = False
) -> list[str]:
    """A compiled model's evaluations and sampling passes are not seen (first_forward.py:
    no global forward hook once a torch.compile(model) wrapper exists): their time stays
    in the steps; checkpoints are. ``apart``: the rollouts run with grad on in eval mode,
    so one after a pass with grad off in the same stretch is an interval of its own (the
    forward with grad on ends that pass; pass_mode.py)."""
    out = []
    # (iteration, kind, the loop's time, its time in garbage collections and waiting for a
    # core inside it: 0 in older runs)
    evals = [(p[0], p[1], p[3], _gc(p, 4) + _gc(p, 5)) for p in own["passes"]]
    saves = [(c[0], "checkpoint", c[1], _gc(c, 2) + _gc(c, 3)) for c in own["checkpoints"]]
    steps = [(t0, t1) for _i, t0, t1, _d in tl["steps"]]
    # Passes after one step are one stretch outside the steps: one interval, of the kind
    # of the evidence seen first (a rollout's env steps, or not: eval)
    merged: dict[tuple[int, bool], tuple[int, str, float, float]] = {}
    for i, what, dur, gc in evals:
        kind = "rollout" if what == "rollout" else "eval"
        key = (i, apart and kind == "rollout")
        if key in merged:
            _, k, d, g = merged[key]
            merged[key] = (i, k if k == kind else "", d + dur, g + gc)
        else:
            merged[key] = (i, kind, dur, gc)
    for kind, made in (("", list(merged.values())), ("checkpoint", saves)):
        kinds = ("eval", "rollout") if not kind else (kind,)
        got = sorted((t0, length, k) for k, t0, length in tl["between"] if k in kinds)
        if compiled and not kind:
            if got:
                out.append(f"{len(got)} eval intervals, none seen under torch.compile(model)")
            continue
        if len(got) != len(made):
            last = f" (after the last step: {sum(1 for m in made if m[0] >= len(steps) - 1)})"
            out.append(f"{len(got)} {'/'.join(kinds)} intervals, the loop made {len(made)}{last}")
            continue
        for (i, what, dur, gc), (_t0, length, k) in zip(made, got):
            if what and what != k and kind != "checkpoint":
                out.append(f"the pass after iteration {i} read {k}, the loop made {what}")
            # A collection or a preemption in the loop's timer may fall outside perftop's
            # interval (in torch.save before its writer opens, after the region's exit): the
            # interval may be that much shorter.
            slack = SHARE * dur + PASS_SLACK_S
            # A pass with grad off ends where the loop's next training activity is seen (a
            # forward with grad on, a training batch, a save): what the loop does after its
            # timer stops (the next feeder's batch, its code before the forward) is in it,
            # bounded by _counted_once (no interval overlaps the step after it).
            capped = what != "checkpoint" or length <= dur + slack
            if not capped or length < dur - gc - slack:
                out.append(f"{k} after iteration {i}: {length:.4f} s, the loop's {dur:.4f} s "
                           f"({gc:.4f} s of it in collections and waiting for a core)")  # fmt: skip
    cut = [(t0, t0 + n) for k, t0, n in tl["between"] if k != "checkpoint_overlapped"]
    return out + _counted_once(steps, cut)


def _idle_after(spec: Spec, own: dict[str, Any], tl: dict[str, Any]) -> list[str]:
    """A process that idles after its last step (``idle_s``): the intervals after that
    step hold the passes and saves the loop made there (a final test, a last save), within
    10% and TAIL_S of its own code after them, not the idle (no interval of its own, none
    longer by it)."""
    if not spec.idle_s or not tl["steps"]:
        return []
    last = tl["steps"][-1][2]
    after = sum(n for _k, t0, n in tl["between"] if t0 >= last - OVERLAP_S)
    made = sum(p[3] for p in own["passes"] if p[0] >= spec.steps - 1)
    made += sum(c[1] for c in own["checkpoints"] if c[0] >= spec.steps - 1)
    if after > made * (1 + SHARE) + TAIL_S:
        return [f"{after:.4f} s between steps after the last one, the loop's {made:.4f} s"]
    return []


def _counted_once(steps: list[tuple[float, float]], gaps: list[tuple[float, float]]) -> list[str]:
    """No second counted twice: each interval lies between two steps' ends, and the step
    ending after it plus the intervals cut out of it fit in the time since the step before
    ended. (A step's record ends where it ended and is as long as it was: one with an
    interval cut out of it, the loop's code before a pass, starts before the pass did.)"""
    out = []
    ends = [s1 for _s0, s1 in steps]
    inside: dict[int, float] = {}
    for a, b in gaps:
        k = next((k for k, e in enumerate(ends) if e > b - OVERLAP_S), len(ends))
        if k == 0:
            continue  # before the first step: in no step
        if a < ends[k - 1] - OVERLAP_S:
            out.append(f"an interval of {b - a:.4f} s overlaps step {k - 1}")
        elif k < len(ends):
            inside[k] = inside.get(k, 0.0) + (b - a)
    for k, cut in sorted(inside.items()):
        s0, s1 = steps[k]
        since = s1 - ends[k - 1]
        if (s1 - s0) + cut > since + OVERLAP_S:
            out.append(
                f"step {k} ({s1 - s0:.4f} s) and the {cut:.4f} s between steps before it "
                f"overlap: {since:.4f} s since step {k - 1} ended"
            )
    return out


def _stalls(
    own: dict[str, Any], rep: dict[str, Any], compiled: bool = False, idle: bool = False
) -> list[str]:
    """No stall but a long pass's; a compiled model's unseen pass stays in a step, which
    may then be a stalled one (the step after the pass). ``idle``: the loop sleeps on its
    training thread after its last step, which cannot be told from a stall before a next
    step or inside a last pass (docs/screen.md, Stalls): one reported there is by design."""
    out = []
    long_passes = {p[0]: p[3] for p in own["passes"] if p[3] >= HANG_S}
    long_passes.update({c[0]: c[1] for c in own["checkpoints"] if c[1] >= HANG_S})
    for s in rep.get("stalls") or []:
        if idle and s["step"] >= own["steps"] - 1:
            continue  # after the loop's last step (or in it, where backward ends steps: the
            # last one ends where its last activity did, once the process exits): its idle
        if s.get("during"):  # a pass that hangs: only one that ran that long
            if not long_passes:
                out.append(f"a {s['during']} reported hanging {s['stalled_s']} s, none so long")
            continue
        before = long_passes.get(s["step"]) or long_passes.get(s["step"] - 1)
        if before and compiled:
            continue
        was = f" (a {before:.1f} s pass before it)" if before else ""
        out.append(f"step {s['step']} stalled {s['stalled_s']} s{was}")
    return out


def _data_wait(
    spec: Spec, own: dict[str, Any], rep: dict[str, Any], tl: dict[str, Any]
) -> list[str]:
    """Steps 1..N-1 (step 0's wait holds the loader's start, its workers, which comes
    before the first step). The loop times its fetch (wall, and blocked: less its CPU time
    and its wait for a core), its whole ``batch()`` (the fetch, a per-sample transform, the
    move to the device), and its own time off the CPU between its forwards (``fwd()``). A
    DataLoader's wait is its ``__next__``: at least the fetch's wall time, less the loop's
    garbage collections in it. Behind another feeder it is the training
    thread's time blocked before its forwards: at least the fetch's time blocked (a
    generator's own CPU work is not waiting), at most the loop's time off the CPU between
    forwards (it holds any wait for a feeder thread's GIL, wherever the loop's lines were)."""
    feeder = spec.data not in LOADER_ON_TRAINING_THREAD or spec.ahead == "thread"
    waits = [w for w in own["waits"] if w[0] >= 1]
    # a collection, or a wait for a core, in the fetch's timer may fall outside a
    # DataLoader's __next__ (in a prefetcher's own code): the lower bound leaves them out
    fetch = sum(w[2] if feeder and len(w) > 2 else w[1] - _gc(w, 3) - _gc(w, 4) for w in waits)
    whole = max(sum(w for i, w in own["batch_waits"] if i >= 1), sum(own.get("blocked", ())))
    if feeder and spec.compiled:  # no forward hook once a torch.compile(model) wrapper exists
        return [] if rep["steps"].get("data_wait_fraction") is None else ["measured, not N/A"]
    if rep["steps"].get("data_wait_fraction") is None:
        return [f"N/A, the loop waited {fetch:.4f} s"]
    source = rep["steps"].get("data_wait_source")
    if source != ("before_forward" if feeder else "dataloader"):
        return [f"measured as {source!r} for {spec.data} data"]
    got = sum(d for i, _t0, _t1, d in tl["steps"] if i >= 1)
    n = len(tl["steps"]) - 1
    slack = max(DATA_SLACK_S, FETCH_SLACK_S * max(n, len(waits)))  # accumulation: 2 a step
    if got < fetch - max(SHARE * fetch, slack) or got > whole + max(SHARE * whole, slack):
        return [f"{got:.4f} s over steps 1..{n}, the loop's {fetch:.4f} s ({whole:.4f} s whole)"]
    return []


def _gc(row: list[Any], at: int) -> float:
    """The loop's time in garbage collections (or waiting for a core) inside one of its
    timers: 0 where a run of an older fuzzer did not count it."""
    return float(row[at]) if len(row) > at else 0.0
