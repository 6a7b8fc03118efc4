"""What the detectors and the rules found: the sync detector's sites and its watch, and
the hints.

Frozen rows of plain values like the rest of a :class:`~perftop.model.snapshot.Snapshot`,
kept apart as what a snapshot diagnoses (the lines that make the host wait for the device,
and the rules' verdicts) rather than what it measures of the job, its machine and its GPUs.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

Severity = Literal["high", "medium", "info"]  # a hint's weight, most at stake first
SyncKind = Literal["sync", "potential"]  # seen by CUDA's debug mode, or by the detector


@dataclass(frozen=True, slots=True)
class SyncWatch:
    """Whether the sync detector is looking: the steps it watched (all processes), and
    why it stopped sampling for good where it did ("" while it samples)."""

    watched: int = 0
    paused: str = ""
    passes: int = 0  # passes between steps it watched whole (their syncs: sync_between)


def passes_run(by_kind: Iterable[tuple[str, int]]) -> int:
    """The passes between steps, of (kind, count) pairs, that the sync detector may watch:
    evaluations and rollouts, not a checkpoint's saves nor a library's report call."""
    return sum(n for kind, n in by_kind if not kind.startswith("checkpoint") and kind != "report")


@dataclass(frozen=True, slots=True)
class SyncSite:
    """A line of user code that made (``sync``) or would make (``potential``) the host wait
    for the device, directly or through a library. ``per_step`` is averaged over the steps
    that were observed."""

    op: str
    file: str
    line: int
    function: str
    kind: SyncKind
    count: int
    per_step: float
    # Host seconds per watched step spent inside this site's calls, waiting for the device:
    # measured on an accelerator in the sampled steps; None on a CPU run (nothing to wait
    # for) and for a site only CUDA's sync debug mode saw.
    blocked_s: float | None = None
    last_step: int | None = None
    # When file/line is the user's line that led into a library which made the call: that
    # library's line (lib_*) and package. With no user frame on the stack, file/line is the
    # library's own line and only ``package`` is set.
    lib_file: str | None = None
    lib_line: int | None = None
    lib_function: str | None = None
    package: str | None = None
    host: str = ""  # set where a collector merges nodes
    # Between-step sites only (``Snapshot.sync_between``): the count per pass, over the
    # passes watched; ``per_step`` is then 0 (such syncs are no step's).
    per_pass: float | None = None
    passes: int | None = None
    # Sampled sites (kind ``potential``, or ``sync`` seen in sampled steps): the watched
    # steps ``per_step`` rests on, its standard error (0 when every step was watched: the
    # exact mode, or a per-step site of the same count in each watched step), and in how many of those steps the site was seen. None where unknown.
    watched: int | None = None
    error: float | None = None
    seen: int | None = None
    # Seen in every watched step: a per-step site, ``per_step`` its mean count in a step.
    every_step: bool = False
    # Every step was watched (the exact mode): error 0 says that only with this (a sampled
    # per-step site of one count in each watched step has error 0 too).
    exact: bool = False
    # A library site reached from user lines: each (file, line, function, count), the most
    # frequent first (the row's own file/line); () where the user's own line made the call.
    callers: tuple[tuple[str, int, str, int], ...] = ()


@dataclass(frozen=True, slots=True)
class Hint:
    """A diagnosis: a pure rule's verdict over snapshots, with the measured evidence.

    ``est_gain`` is the share of step (or wall) time at stake, 0..1, an upper bound where
    ``est_gain_text`` says so; ``panel`` names the panel whose figures prove it."""

    id: str
    severity: Severity
    title: str
    evidence: tuple[str, ...] = ()
    advice: tuple[str, ...] = ()
    est_gain: float | None = None
    est_gain_text: str = ""
    panel: str = ""
    since_t: float | None = None
    host: str = ""  # set where a collector merges nodes
    until_t: float | None = None  # when it stopped holding (whole-run snapshots only)
    seen_live: bool = True  # the live engine showed it (held ~3 s over 3 evaluations)
    whole_run: bool = False  # the whole-run verdict gives it (whole-run snapshots only)
