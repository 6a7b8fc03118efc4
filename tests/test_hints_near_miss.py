"""Every rule has a firing case and its near-miss beside it: the same workload's figures
just under the rule's entering bar. The table must cover every rule the engine runs."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pytest

from perftop.hints import RULES, evaluate, order
from perftop.hints.verdict import verdict
from perftop.model.comm_rows import CommStats, RankComm
from perftop.model.snapshot import (
    BetweenRow,
    HostRow,
    Meta,
    ProcessRole,
    ProcRow,
    Snapshot,
    SyncSite,
)
from tests.test_hints_rules_more import H100_MEM, PID, T0, ddp, nvml, snap


def sync(per_step: float) -> Snapshot:
    site = SyncSite("nonzero", "/x/loss.py", 41, "loss", "potential", 90, per_step)
    return replace(snap(0.0), sync=(site,))


def fed(data: float) -> Snapshot:
    """A loop fed by a thread or a generator (no DataLoader on the training thread): its data
    wait is its time off the CPU before each forward."""
    s = snap(data, 0.05, nw=0)
    return replace(s, steps=replace(s.steps, data_wait_source="before_forward"), loaders=())


def iowait(pct: float) -> Snapshot:
    return snap(0.03, host=HostRow(cpu_count=8, cpu_percent=30.0, iowait_percent=pct))


def contended(wait: float) -> Snapshot:
    """The trainer waits ``wait`` of the time for a core of 2 that others keep busy."""
    procs = (ProcRow(PID, 1, cpu_percent=50.0, core_wait_share=wait),)
    s = snap(0.0, host=HostRow(cpu_count=2, cpu_percent=100.0), procs=procs)
    return replace(s, meta=replace(s.meta, monitor_cpu_percent=2.0))


def throttled(wait: float) -> Snapshot:
    """The trainer at 0.5 core under its cgroup's limit of 0.5 cores, on an idle host of 2,
    waiting ``wait`` of the time (tests/test_cpu_limits.py's run read 0.50)."""
    procs = (ProcRow(PID, 1, cpu_percent=49.0, core_wait_share=wait, cpu_quota=0.5),)
    return snap(0.0, host=HostRow(cpu_count=2, cpu_percent=27.0), procs=procs)


def uss(mib: int) -> Snapshot:
    procs = tuple(
        ProcRow(PID + 1 + i, PID, uss_bytes=mib * 2**20, uss_bytes_first=mib * 2**20)
        for i in range(2)
    )
    roles = tuple(ProcessRole(PID + 1 + i, "worker", worker_id=i) for i in range(2))
    return replace(snap(0.0, procs=procs), roles=roles)


def oversub(busy: float) -> Snapshot:
    """Two torch threads on two cores beside two workers on the CPU ``busy`` of the time."""
    procs = (ProcRow(PID, 1, cpu_percent=190.0),) + tuple(
        ProcRow(PID + 1 + i, PID, cpu_percent=100.0 * busy) for i in range(2)
    )
    host = HostRow(cpu_count=2, cpu_percent=97.0)
    return snap(0.0, busy=busy, cpu=1.0, host=host, procs=procs, threads=2)


def between(share: float) -> Snapshot:
    rows = (BetweenRow("eval", 100.0 * share, 4, T0 + 50, T0 + 60),)
    return Snapshot(meta=Meta(start_t=T0, now_t=T0 + 100.0), between=rows)


def cuda(util: float, data: float = 0.002) -> Snapshot:
    return snap(data, device="cuda:0", gpus=(nvml(0, util),), pin=True)


def mem(share: float) -> Snapshot:
    return Snapshot(gpus=(nvml(0, 80.0, int(share * H100_MEM)),))


def pinned(pin: bool) -> Snapshot:
    return snap(device="cuda:0", gpus=(nvml(0, 60.0),), pin=pin)


def imbalance(lo: float) -> Snapshot:
    return Snapshot(gpus=(nvml(0, 95.0), nvml(1, lo)))


def captured(backward_s: float) -> Snapshot:
    """A capture of a 61 ms step whose backward took ``backward_s`` (aten::mm 65% of it)."""
    from perftop.events import CaptureOps
    from perftop.model.capture import CaptureReducer
    from tests.tui.fakes import FAKE_OPS

    phases = {"data": 0.005, "forward": 0.018, "backward": backward_s, "optimizer": 0.006}
    step = sum(phases.values())
    ops = tuple(r if r[0] != "aten::mm" else (*r[:3], 0.65 * backward_s, *r[4:]) for r in FAKE_OPS)
    r = CaptureReducer()
    r.apply(CaptureOps(T0, PID, "c1", 41, 3, step, step, phases, ops))
    parts: dict = {}
    r.contribute(parts, None)
    return Snapshot(meta=Meta(start_t=T0, now_t=T0 + 10.0), **parts)


def comm(share: float) -> Snapshot:
    """Rank 0 waits ``share`` of its 100 ms step at collectives (exposed)."""
    from perftop.model.comm_rows import CollRow, CommStats, RankComm

    rows = (CollRow("default_pg", "all_reduce", 40, 4 << 20, share * 0.1, True),)
    r0 = RankComm(PID, 0, "", rows, 10, share * 0.1, 0.002, share)
    r1 = RankComm(PID + 1, 1, "", rows, 10, 0.0, 0.0, 0.0)
    return replace(snap(0.0), comm=CommStats((r0, r1)))


def hung(waited: float) -> Snapshot:
    """Two ranks of 10 steps; rank 0 has waited ``waited`` s in an all-reduce rank 1 never
    entered (the events a real run sends, into a real session; the default threshold)."""
    from perftop.events import SessionStart
    from perftop.model import Session
    from tests.hang_events import hang_events

    s = Session()
    s.apply(SessionStart(999.0, ("train.py",), "/", "a", 1, "0"))
    evs, waiting = hang_events(waited, PID)
    s.apply_all([*evs, waiting])
    return s.snapshot()


def stalled(share: float) -> Snapshot:
    """200 steps of 100 ms, one of which (step 101) stalled in the job's own code: its time
    over the median is ``share`` of the run (a real session fed the events a run sends:
    the steps, and the stacks the monitor dumped 2.5 s into the stall)."""
    from perftop.events import Hello, SessionStart, StallCapture, Step
    from perftop.model import Session

    other = 199 * 0.1  # the other steps' time; the stalled step's makes the share
    long = (share * other + 0.1) / (1 - share)
    s = Session()
    s.apply(SessionStart(1000.0, ("train.py",), "/", "a", 1, "0"))
    s.apply(Hello(1000.0, PID, 1, "a", ("train.py",)))
    t = 1000.0
    for i in range(200):
        d = long if i == 100 else 0.1
        if i == 100:
            frames = (("wait_for_lock", "/x/train.py", 4), ("main", "/x/train.py", 9))
            s.apply(StallCapture(t + 2.5, PID, 100, 2.5, 0.1, ((PID, "main", frames),)))
        s.apply(Step(PID, i, t, t + d, backward=0.05))
        t += d
    return s.snapshot(window=None)


# rule id: (the workload's figures that fire it, the same just under the bar)
CASES: dict[str, tuple[Callable[[], Snapshot], Callable[[], Snapshot]]] = {
    "input-bound": (lambda: snap(0.022, 0.05), lambda: snap(0.021, 0.05)),  # 30.6% / 29.6%
    "wait-before-forward": (lambda: fed(0.022), lambda: fed(0.021)),  # 30.6% / 29.6%
    "io-bound": (lambda: iowait(20.0), lambda: iowait(19.0)),
    "host-device-sync": (lambda: sync(1.0), lambda: sync(0.9)),
    "worker-memory": (lambda: uss(512), lambda: uss(500)),
    "too-many-workers": (
        lambda: snap(0.0, nw=6, busy=0.19),
        lambda: snap(0.0, nw=6, busy=0.21),
    ),
    "cpu-oversubscribed": (lambda: oversub(0.26), lambda: oversub(0.24)),
    "cpu-contention": (lambda: contended(0.10), lambda: contended(0.09)),
    "cpu-throttled": (lambda: throttled(0.10), lambda: throttled(0.09)),
    "between-steps": (lambda: between(0.20), lambda: between(0.19)),
    "gpu-underutilized": (lambda: cuda(49.0), lambda: cuda(50.0)),
    "gpu-memory-pressure": (lambda: mem(0.951), lambda: mem(0.949)),
    "gpu-bound": (lambda: cuda(90.0), lambda: cuda(89.0)),
    "pageable-copy": (lambda: pinned(False), lambda: pinned(True)),
    "straggler": (lambda: ddp(0.0225), lambda: ddp(0.0195)),
    "comm-bound": (lambda: comm(0.20), lambda: comm(0.19)),
    "collective-hang": (lambda: hung(10.0), lambda: hung(9.9)),
    "stalled-step": (lambda: stalled(0.1005), lambda: stalled(0.0995)),
    "gpu-imbalance": (lambda: imbalance(65.0), lambda: imbalance(66.0)),
    # backward 40.0% / 39.6% of the captured step
    "phase-top-ops": (lambda: captured(0.01934), lambda: captured(0.01895)),
}


def test_the_table_covers_every_rule() -> None:
    fired = set()
    for fire, _ in CASES.values():
        fired |= set(evaluate(fire())[0])
    assert fired >= set(CASES) and len(CASES) == len(RULES)


@pytest.mark.parametrize("hint_id", sorted(CASES))
def test_fires_and_its_near_miss_stays_quiet(hint_id: str) -> None:
    fire, near = CASES[hint_id]
    found, errors = evaluate(fire())
    assert not errors and hint_id in found
    found, errors = evaluate(near())
    assert not errors and hint_id not in found, found.get(hint_id)
    # the whole-run verdict reads the same bars
    assert hint_id in {h.id for h in verdict(fire())}
    assert hint_id not in {h.id for h in verdict(near())}


def test_behind_a_feeder_the_wait_is_named_as_measured_not_as_input() -> None:
    """The same figures give input-bound behind a DataLoader and wait-before-forward behind a
    feeder, whose time off the CPU may be the loop's own blocking work: never both."""
    found, _ = evaluate(fed(0.5))
    assert "wait-before-forward" in found and "input-bound" not in found, found
    h = found["wait-before-forward"]
    assert h.severity == "high" and h.est_gain == pytest.approx(0.5 / 0.55, abs=1e-4)
    assert h.evidence[0].startswith("the training thread is off the CPU before its forwards 91%")
    assert "500ms of a 550ms step" in h.evidence[0], h.evidence
    loader, _ = evaluate(snap(0.5, 0.05))
    assert "input-bound" in loader and "wait-before-forward" not in loader
    # a rank that waits at collectives: one before its forward (a barrier) is in that time
    s = fed(0.5)
    rank0 = RankComm(PID, 0, "h", wait_s=0.3, exposed_share=0.55, steps=40)
    h = evaluate(replace(s, comm=CommStats(ranks=(rank0,))))[0]["wait-before-forward"]
    assert h.evidence[-1].startswith("this rank also waits 300ms a step at collectives"), h


def ended(s: Snapshot) -> Snapshot:
    """``s`` as a finished job leaves it: every process exited, the probes' last samples
    taken as it shut down (idle), their run averages and peaks kept."""
    procs = tuple(
        replace(
            p,
            alive=False,
            cpu_percent=1.0,
            cpu_percent_avg=p.cpu_percent,
            uss_bytes=None,
            uss_bytes_max=p.uss_bytes,
        )  # fmt: skip
        for p in s.processes
    )
    workers = tuple(replace(w, exited=True) for w in s.workers)
    host = replace(s.host, cpu_percent=5.0, cpu_percent_avg=s.host.cpu_percent)
    return replace(s, processes=procs, workers=workers, host=host, meta=replace(s.meta, ended=True))


@pytest.mark.parametrize("hint_id", ["cpu-oversubscribed", "worker-memory"])
def test_the_verdict_reads_a_finished_jobs_processes_as_they_ran(hint_id: str) -> None:
    fire, near = CASES[hint_id]
    assert hint_id not in evaluate(ended(fire()))[0]  # the last samples: nothing left
    assert hint_id in {h.id for h in verdict(ended(fire()))}
    assert hint_id not in {h.id for h in verdict(ended(near()))}


def test_a_hang_under_way_comes_first() -> None:
    """While it lasts no rank steps: all of the time is at stake, above a rank's 20% wait
    at collectives; its text says how long so far."""
    s = hung(12.0)
    s = replace(s, comm=replace(s.comm, ranks=comm(0.20).comm.ranks))
    found, errors = evaluate(s)
    assert not errors and set(found) >= {"collective-hang", "comm-bound"}, found
    h = found["collective-hang"]
    assert h.est_gain == 1.0 and h.est_gain_text.startswith("all of it while it lasts"), h
    assert order(list(found.values()))[0].id == "collective-hang"
