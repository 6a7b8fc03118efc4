"""Rules fire on snapshots built to trigger them and stay quiet on near misses; the engine
raises a hint only after it held, and drops it with hysteresis (event time)."""

from __future__ import annotations

from dataclasses import replace

from perftop.hints import evaluate
from perftop.hints.engine import HintEngine
from perftop.model.snapshot import HostRow, Loader, Meta, Snapshot, StepRow, StepStats, SyncSite
from perftop.model.workers import WorkerRow

T0 = 1_700_000_000.0


def loop_snap(data: float, compute: float = 0.02, n: int = 60) -> Snapshot:
    rows, t = [], T0
    for i in range(n):
        rows.append(StepRow(1, i, t, t + data + compute, data, 0.005, 0.001, compute - 0.006))
        t += data + compute
    workers = tuple(
        WorkerRow(10 + i, 1, i, 2, T0, t, False, 30, 9.0, 8.5, 0.3, 0.97, 0.95, 3.2, 4096, 1)
        for i in range(2)
    )
    return Snapshot(
        meta=Meta(start_t=T0, now_t=t),
        steps=StepStats(pid=1, count=n, recent=tuple(rows)),
        loaders=(Loader(1, 0, 2, 16, False, 2, False, ((0, 10), (1, 11)), "Shapes", T0),),
        host=HostRow(cpu_count=8, cpu_percent=40.0),
        workers=workers,
    )


def test_input_bound_fires_with_worker_advice_and_stays_quiet_on_near_miss() -> None:
    found, errors = evaluate(loop_snap(data=0.03))
    assert not errors
    h = found["input-bound"]
    assert any("2 workers make" in e for e in h.evidence)
    assert any("num_workers from 2" in a for a in h.advice)
    assert h.est_gain is not None and 0.5 < h.est_gain < 0.7
    assert "input-bound" not in evaluate(loop_snap(data=0.007))[0]  # 26%: below the bar


def test_sync_rule_names_lines_and_ignores_rare_sites() -> None:
    site = SyncSite("nonzero", "/x/loss.py", 41, "loss", "potential", 60, 1.0)
    found = evaluate(replace(loop_snap(0.0), sync=(site,)))[0]
    assert "loss.py:41" in " ".join(found["host-device-sync"].evidence)
    rare = replace(site, per_step=0.04)
    assert "host-device-sync" not in evaluate(replace(loop_snap(0.0), sync=(rare,)))[0]


def test_engine_needs_persistence_and_leaves_with_hysteresis() -> None:
    eng = HintEngine()
    hot, cold = loop_snap(0.03), loop_snap(0.001)
    for k in range(3):
        eng.update(replace(hot, meta=Meta(start_t=T0, now_t=T0 + k)))
        assert not eng.active() if k < 3 else True
    eng.update(replace(hot, meta=Meta(start_t=T0, now_t=T0 + 3)))
    assert [h.id for h in eng.active()] == ["input-bound"]
    eng.update(replace(cold, meta=Meta(start_t=T0, now_t=T0 + 4)))
    assert eng.active()  # one quiet evaluation does not drop it
    eng.update(replace(cold, meta=Meta(start_t=T0, now_t=T0 + 10)))
    assert not eng.active()
    assert eng.whole_run()[0].until_t is not None


def test_the_rules_of_one_evaluation_share_its_loop_and_a_new_snapshot_gets_its_own(
    monkeypatch,
) -> None:
    from perftop.hints import base

    made = []
    real = base._loop
    monkeypatch.setattr(base, "_loop", lambda snap: made.append(snap) or real(snap))
    slow, fed = loop_snap(data=0.03), loop_snap(data=0.001)
    found, _ = evaluate(slow)
    assert "input-bound" in found
    assert made == [slow]  # five rules read the loop: it was made once
    found, _ = evaluate(fed)
    assert "input-bound" not in found  # the last snapshot's loop was not taken for this one
    assert made == [slow, fed]
    lp = base.loop(slow)
    assert lp is not None and abs(lp.data_s - 0.03) < 1e-9
    assert made == [slow, fed, slow]
