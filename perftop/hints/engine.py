"""Persistence for the rules: a hint shows only once its rule has held for a while, and
leaves only after it has stopped holding for a while (no flicker).

The engine lives inside the session model and is driven by event time: it evaluates the
rules every ``EVERY_S`` seconds of the events' own clock, never the wall clock, so a
replay of a recording raises and drops the same hints at the same moments as the live
run did.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from perftop.hints.base import Rule
from perftop.hints.between import between_steps
from perftop.hints.comm import comm_bound
from perftop.hints.contention import cpu_contention
from perftop.hints.cores import cpu_oversubscribed, too_many_workers
from perftop.hints.feeder import wait_before_forward
from perftop.hints.gpu import gpu_bound, gpu_memory_pressure, gpu_underutilized, pageable_copy
from perftop.hints.hang import collective_hang
from perftop.hints.inputs import input_bound
from perftop.hints.memory import worker_memory
from perftop.hints.ops import phase_top_ops
from perftop.hints.ranks import gpu_imbalance, straggler
from perftop.hints.stalled import stalled_step
from perftop.hints.storage import io_bound
from perftop.hints.sync import host_device_sync
from perftop.hints.throttled import cpu_throttled
from perftop.model.snapshot import Hint, Snapshot

RULES: tuple[Rule, ...] = (
    input_bound,
    wait_before_forward,
    io_bound,
    host_device_sync,
    worker_memory,
    too_many_workers,
    cpu_oversubscribed,
    cpu_contention,
    cpu_throttled,
    between_steps,
    gpu_underutilized,
    gpu_memory_pressure,
    gpu_bound,
    pageable_copy,
    straggler,
    comm_bound,
    collective_hang,
    stalled_step,
    gpu_imbalance,
    phase_top_ops,
)

EVERY_S = 1.0  # evaluate this often (event time)
ENTER_S = 3.0  # a condition must hold this long ...
ENTER_EVALS = 3  # ... over this many evaluations in a row
LEAVE_S = 5.0  # a shown hint stays until its condition has failed this long

SEVERITY_ORDER = {"high": 0, "medium": 1, "info": 2}


@dataclass(slots=True)
class _State:
    held_from: float | None = None  # first evaluation of the current run of "holds"
    held: int = 0
    last_true: float | None = None
    latest: Hint | None = None
    shown: bool = False


def order(hints: list[Hint]) -> tuple[Hint, ...]:
    """Most estimated gain first; hints without an estimate after, by severity."""
    return tuple(
        sorted(
            hints,
            key=lambda h: (
                h.est_gain is None,
                -(h.est_gain or 0.0),
                SEVERITY_ORDER.get(h.severity, 3),
                h.id,
            ),
        )
    )


def evaluate(
    snap: Snapshot, active: frozenset[str] = frozenset(), rules: tuple[Rule, ...] = RULES
) -> tuple[dict[str, Hint], dict[str, str]]:
    """Every rule once over ``snap``: the hints found by id, and the rules that failed."""
    found: dict[str, Hint] = {}
    errors: dict[str, str] = {}
    for rule in rules:
        try:
            for h in rule(snap, active):
                found.setdefault(h.id, h)
        except Exception as exc:  # a rule's bug must not stop the model
            errors[rule.__name__] = f"{type(exc).__name__}: {exc}"
    return found, errors


class HintEngine:
    def __init__(self, rules: tuple[Rule, ...] = RULES) -> None:
        self.rules = rules
        self.next_t: float | None = None
        self.frozen = False
        self.states: dict[str, _State] = {}
        self.seen: dict[str, Hint] = {}  # every hint ever shown: its latest instance
        self.errors: dict[str, str] = {}

    def due(self, t: float | None) -> bool:
        if t is None or self.frozen:
            return False
        if self.next_t is None:
            self.next_t = t + EVERY_S
            return False
        return t >= self.next_t

    def update(self, snap: Snapshot) -> None:
        """Evaluate every rule on ``snap`` at its event time ``snap.meta.now_t``."""
        now = snap.meta.now_t
        if now is None or self.frozen:
            return
        self.next_t = now + EVERY_S
        active = frozenset(k for k, s in self.states.items() if s.shown)
        found, errors = evaluate(snap, active, self.rules)
        for name, err in errors.items():
            self.errors.setdefault(name, err)
        for hid, h in found.items():
            st = self.states.setdefault(hid, _State())
            if st.held_from is None:
                st.held_from = now
            st.held += 1
            st.last_true = now
            if not st.shown and st.held >= ENTER_EVALS and now - st.held_from >= ENTER_S:
                st.shown = True
                st.latest = replace(h, since_t=now)
            elif st.shown and st.latest is not None:
                st.latest = replace(h, since_t=st.latest.since_t)
            if st.shown and st.latest is not None:
                self.seen[hid] = st.latest
        for hid, st in self.states.items():
            if hid in found:
                continue
            st.held_from, st.held = None, 0
            if st.shown and st.last_true is not None and now - st.last_true >= LEAVE_S:
                st.shown = False
                if st.latest is not None:
                    self.seen[hid] = replace(st.latest, until_t=st.last_true)
        if snap.meta.ended:
            self.frozen = True  # what held when the job ended stays the verdict

    def active(self) -> tuple[Hint, ...]:
        return order([s.latest for s in self.states.values() if s.shown and s.latest])

    def whole_run(self) -> tuple[Hint, ...]:
        """Every hint shown during the run (``until_t`` set on those that left)."""
        return order(list(self.seen.values()))
