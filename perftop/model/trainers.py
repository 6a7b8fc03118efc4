"""Which training process the step figures are of where a job has several, and which of
them trained at the same time.

Ranks are one distributed job: the lowest rank speaks for it. Trainers without ranks are
either a hogwild job (processes training one shared model at once: their steps add up)
or trainers that follow each other (a sweep's trials, a shell script's runs): there the
one training now is the one to show, and a rate summed over trials that never ran at the
same time is no rate at all. Each trainer is a :data:`Span`; the rules are pure, so the
live snapshot, the report and the replay's index agree.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

# (pid, rank, its first step's start, its last step's end), in the order of first steps
Span = tuple[int, "int | None", "float | None", "float | None"]


def span(stats: Any) -> Span:
    """A trainer's span from its step figures (``StepStats``)."""
    return (stats.pid, stats.rank, stats.first_t, stats.last_t)


def ended(span: Span, spans: Sequence[Span], closed: Collection[int]) -> bool:
    """Whether a trainer has stopped training: its hook said so (``HookClose``), or
    another trainer began stepping after its last step (killed, it never said)."""
    pid, _, _, last = span
    if pid in closed:
        return True
    return last is not None and any(s[2] is not None and s[2] > last for s in spans)


def one_after_another(spans: Sequence[Span]) -> bool:
    """Whether the trainers (two or more) ran one after another: none stepped while
    another did."""
    timed = sorted((s for s in spans if s[2] is not None and s[3] is not None), key=_start)
    if len(timed) < 2 or len(timed) < len(spans):
        return False
    return all(b[2] >= a[3] for a, b in zip(timed, timed[1:], strict=False))  # type: ignore[operator]


def overlapping(span: Span, spans: Sequence[Span]) -> list[Span]:
    """The trainers that stepped while ``span``'s did (itself included)."""
    _, _, t0, t1 = span
    if t0 is None or t1 is None:
        return [span]
    return [
        s
        for s in spans
        if s == span or (s[2] is not None and s[3] is not None and s[2] < t1 and t0 < s[3])
    ]


def primary(spans: Sequence[Span], closed: Collection[int]) -> int | None:
    """The pid the Steps panel shows and the report's step figures are of: the lowest
    rank; without ranks, the first trainer still training, else (all ended) the last of
    trainers that ran one after another, the first of those that ran together."""
    if not spans:
        return None
    ranked = [s for s in spans if s[1] is not None]
    if ranked:
        return min(ranked, key=lambda s: s[1])[0]  # type: ignore[arg-type,return-value]
    if len(spans) == 1:
        return spans[0][0]
    for s in spans:
        if not ended(s, spans, closed):
            return s[0]
    return (max(spans, key=_end) if one_after_another(spans) else spans[0])[0]


def _start(s: Span) -> float:
    return s[2] if s[2] is not None else float("inf")


def _end(s: Span) -> float:
    return s[3] if s[3] is not None else float("-inf")


def whose(pid: int | None, trainers: Sequence[int | None]) -> str:
    """Whose figures the primary's (``pid``) are among several trainers (their pids, in
    the order of their first steps): "first trainer", else "trainer 2 of 3"."""
    i = trainers.index(pid) if pid in trainers else 0
    return "first trainer" if i == 0 else f"trainer {i + 1} of {len(trainers)}"


def rate_together(steps: Any, trainers: Sequence[Any]) -> float | None:
    """The job's steps per second as the primary trains (``StepStats``): the rates of the
    trainers that stepped while it did added up (hogwild), not those of trials that ran
    before or after it. None where one of them has no rate."""
    spans = [span(t) for t in trainers]
    with_it = overlapping(span(steps), spans)
    rates = [t.steps_per_s for t, s in zip(trainers, spans, strict=True) if s in with_it]
    return None if None in rates else sum(r or 0.0 for r in rates)


def rate_over_run(trainers: Sequence[Any]) -> float | None:
    """The whole run's steps per second of trainers without ranks (``StepStats``):
    together, their rates added up; one after another, all their steps over all their
    step time."""
    if one_after_another([span(t) for t in trainers]):
        busy = sum(t.step_sum_s for t in trainers)
        return sum(t.count for t in trainers) / busy if busy > 0 else None
    rates = [t.steps_per_s for t in trainers]
    return None if None in rates else sum(r or 0.0 for r in rates)
