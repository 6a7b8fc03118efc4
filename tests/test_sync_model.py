"""Sampling policy, op naming, and the session reducer's per-step rates and merging."""

from __future__ import annotations

import random
import sys

import pytest
import torch

from perftop.events import Step, SyncBatch, SyncInfo
from perftop.fmt_sync import sync_rate
from perftop.hook.frames import op_at
from perftop.hook.sync_sampler import Sampler
from perftop.model import Session
from perftop.model.sync import SyncReducer
from perftop.tui.widgets.sync import subtitle
from perftop.wire import STEP_RECORD, StepBatch


def run_sampler(s: Sampler, n: int, dur: float, watched_extra: float) -> list[int]:
    watched, t, w = [], 0.0, False
    for i in range(n):
        t += dur + (watched_extra if w else 0.0)
        if w:
            watched.append(i)
        w = s.closed(i, t, w)
    return watched


def distances(watched: list[int]) -> list[int]:
    return [b - a for a, b in zip(watched, watched[1:])]


def test_early_steps_then_spaced_by_cost():
    s = Sampler(early=3, every=100, budget_s=2e-6)
    watched = run_sampler(s, 200_000, 300e-6, 1e-3)  # a sample costs 1 ms more
    assert watched[:3] == [1, 2, 3]
    later = distances([i for i in watched if i > 50])
    # 1 ms / 2 µs per step = 500: each step watched with probability 1/500, so the
    # distances are geometric (no fixed gap to be in step with a job's periodic work)
    assert sum(later) / len(later) == pytest.approx(500, rel=0.15)
    assert min(later) < 100 and max(later) > 1000
    extra = len(watched) * 1e-3 / 200_000
    assert extra < 5e-6


def test_the_step_before_each_watch_is_primed_and_paid_for():
    """After the early steps, the step before each watched one learns marks (primed); its
    extra time is the sample's, out of the same budget: 1 ms each, twice 500 apart."""
    s = Sampler(early=3, every=100, budget_s=2e-6)
    t, w, p, watched, primed = 0.0, False, False, [], []
    for i in range(200_000):
        t += 300e-6 + (1e-3 if w or p else 0.0)
        (watched if w else primed if p else []).append(i)
        w, p = s.closed(i, t, w, p), False
        if s.primes(i):
            assert s.wake_at(i - 1) <= i  # the callback runs where it must prime
            p = True
    later = [i for i in watched if i > 50]
    assert [i - 1 for i in later] == [i for i in primed if i >= 50]
    assert 1 not in primed and 2 not in primed  # the early steps are not primed
    d = distances(later)
    assert sum(d) / len(d) == pytest.approx(1000, rel=0.15)


def test_the_default_budget_on_a_tight_cpu_step():
    """The defaults on the step of ``benchmarks/e2e_overhead.py`` (165 µs; a watched step
    218 µs more, the primed one before it 188 µs more, as ``sync_sample_cost.py`` measures
    them): sampling costs it 0.1% of the step, 0.165 µs a step amortized (0.5 before)."""
    s, n = Sampler(), 400_000
    t, w, p, extra = 0.0, False, False, 0.0
    for i in range(n):
        more = 218e-6 if w else 188e-6 if p else 0.0
        t += 165e-6 + more
        if i > 3:
            extra += more
        w, p = s.closed(i, t, w, p), False
        p = s.primes(i)
    assert extra / n == pytest.approx(0.165e-6, rel=0.1)  # the early samples: +8%


@pytest.mark.parametrize(
    ("text", "got"), [("0.25", 0.25), ("2", 2.0), ("", 0.5), ("1µs", 0.5), ("nan", 0.5),
                      ("inf", 0.5), ("-3", 0.0)]
)  # fmt: skip
def test_the_budget_setting_takes_fractions_and_a_typo_never_breaks_training(
    monkeypatch, text, got
):
    from perftop.hook.state import env_float

    monkeypatch.setenv("PERFTOP_SYNC_BUDGET_US", text)
    assert env_float("PERFTOP_SYNC_BUDGET_US", 0.5) == got


def test_cheap_samples_use_the_minimum_gap():
    s = Sampler(early=2, every=100, budget_s=2e-6)
    watched = run_sampler(s, 100_000, 300e-6, 50e-6)
    assert watched[:2] == [1, 2]
    later = distances([i for i in watched if i > 50])
    assert sum(later) / len(later) == pytest.approx(100, rel=0.15)


def test_long_steps_may_sample_more_often():
    s = Sampler(early=0, every=10, budget_s=2e-6)
    watched = run_sampler(s, 20_000, 0.1, 1e-3)  # 0.1% of a 100 ms step is 100 µs
    d = distances(watched)
    assert sum(d) / len(d) == pytest.approx(10, rel=0.1)


def test_periodic_work_is_sampled_at_its_own_rate():
    """A log line every 10 steps: a fixed gap of 200 would watch it always or never."""
    s = Sampler(early=0, every=200, budget_s=1.0, fixed=True)
    watched = run_sampler(s, 400_000, 1e-3, 0.0)
    hit = sum(1 for i in watched if i % 10 == 0) / len(watched)
    assert hit == pytest.approx(0.1, abs=0.03)


def test_distributed_ranks_watch_the_same_steps():
    """Each rank with its own timings; the schedule is the step index's alone."""
    fast = run_sampler(Sampler(3, 50, 1e-6, fixed=True), 5000, 1e-3, 5e-3)
    slow = run_sampler(Sampler(3, 50, 1e-6, fixed=True), 5000, 7e-3, 40e-3)
    assert fast == slow and len(fast) > 50
    # without ``fixed`` the gaps follow each rank's own cost, and the ranks drift apart
    a = run_sampler(Sampler(3, 50, 1e-6), 5000, 1e-3, 5e-3)
    b = run_sampler(Sampler(3, 50, 1e-6), 5000, 7e-3, 1e-3)
    assert a != b


class Probe:
    """Records the op name of the line that is calling it, as the CUDA path would."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def _note(self) -> None:
        self.seen.append(op_at(sys._getframe(2)))

    def __int__(self) -> int:
        self._note()
        return 0

    def __bool__(self) -> bool:
        self._note()
        return True

    def __getitem__(self, i: object) -> int:
        self._note()
        return 0

    def item(self) -> int:
        self._note()
        return 0


def test_op_named_from_the_line():
    p = Probe()
    int(p)
    if p:
        pass
    p[p]
    p.item()
    torch.nonzero(torch.ones(1)).shape[0] + p.item()
    assert p.seen == ["int", "bool", "index", "item", "item"]


def batch(step, sites, sampled=True, pid=1, between=(), passes=0):
    return SyncBatch(pid, step, sampled, tuple(sites), tuple(between), passes)


def test_syncs_between_steps_are_per_pass_not_per_step():
    """A sampling pass of 500 ``.item()`` caught in one of 7 watched stretches."""
    s = Session()
    s.apply(SyncInfo(0.0, 1, False, True, 3, 100))
    for i in range(1, 8):
        sites = [("item", "a.py", 3, "f", "potential", 1, None)] if i % 2 else []
        if i == 1:
            pas = [("item", "a.py", 18, "sample", "potential", 500, None)]
            s.apply(batch(i, sites, between=pas, passes=1))
        else:
            s.apply(batch(i, sites))
    snap = s.snapshot(window=None)
    (row,) = snap.sync
    assert (row.line, row.per_step) == (3, pytest.approx(4 / 7))
    (b,) = snap.sync_between
    assert (b.line, b.count, b.per_pass, b.passes, b.per_step) == (18, 500, 500.0, 1, 0.0)


def test_per_step_over_sampled_steps_only():
    s = Session()
    s.apply(SyncInfo(0.0, 1, False, True, 3, 100))
    for i in range(10):
        s.apply(Step(1, i, float(i), i + 1.0))
    s.apply(batch(1, [("item", "a.py", 3, "f", "potential", 2, None)]))
    s.apply(batch(2, [("item", "a.py", 3, "f", "potential", 2, None)]))
    s.apply(batch(3, []))
    (row,) = s.snapshot(window=None).sync
    # steps 1-3 watched for sure, none of 4-9 drawn: the rest is unknown, and says so
    assert (row.count, row.per_step, row.last_step) == (4, pytest.approx(4 / 9), 2)
    assert row.error == pytest.approx(4 / 3 * 6 / 9) and not row.every_step


def test_real_syncs_over_all_steps_and_they_hide_potentials():
    s = Session()
    s.apply(SyncInfo(0.0, 1, True, True, 3, 100))
    for i in range(8):
        s.apply(Step(1, i, float(i), i + 1.0))
    # A CUDA process: the sampled detector timed the call (host time inside it, the wait);
    # the sync debug mode counts every step but cannot time anything.
    s.apply(batch(1, [("nonzero", "a.py", 5, "f", "potential", 1, 0.0009)]))
    s.apply(batch(1, [("sync", "a.py", 5, "f", "sync", 1, None)], sampled=False))
    s.apply(batch(4, [("sync", "a.py", 5, "f", "sync", 3, None)], sampled=False))
    s.apply(batch(4, [("item", "b.py", 9, "g", "potential", 1, 0.0002)]))
    rows = s.snapshot(window=None).sync
    assert [(r.op, r.file, r.kind) for r in rows] == [
        ("nonzero", "a.py", "sync"),  # named by the detector, counted by CUDA
        ("item", "b.py", "potential"),
    ]
    assert rows[0].per_step == pytest.approx(4 / 8)
    # per watched step: two steps were sampled
    assert rows[0].blocked_s == pytest.approx(0.0009 / 2)
    assert rows[1].blocked_s == pytest.approx(0.0002 / 2)


def test_nothing_measured_on_a_cpu_run():
    s = Session()
    s.apply(SyncInfo(0.0, 1, False, True, 3, 100))
    s.apply(batch(1, [("item", "a.py", 3, "f", "potential", 1, None)]))
    (row,) = s.snapshot(window=None).sync
    assert row.blocked_s is None


LIB = "/venv/lib/python3.11/site-packages/transformers/trainer.py"


def test_sites_group_by_user_line_and_library_line():
    s = Session()
    s.apply(SyncInfo(0.0, 1, False, True, 3, 100))
    via = (LIB, 1911, "_run_epoch", "transformers")
    s.apply(batch(1, [("item", "train.py", 52, "main", "potential", 2, None, *via)]))
    s.apply(batch(2, [("item", "train.py", 52, "main", "potential", 2, None, *via)]))
    other = (LIB, 2400, "_maybe_log", "transformers")
    s.apply(batch(2, [("item", "train.py", 52, "main", "potential", 1, None, *other)]))
    # recorded before the library fields existed: a plain user site
    s.apply(batch(2, [("item", "train.py", 60, "main", "potential", 1, None)]))
    # no user frame on the stack: the library's own line, and its package
    s.apply(batch(2, [("item", LIB, 700, "f", "potential", 1, None, None, None, None, "x")]))
    rows = {(r.line, r.lib_line): r for r in s.snapshot(window=None).sync}
    assert set(rows) == {(52, 1911), (52, 2400), (60, None), (700, None)}
    r = rows[(52, 1911)]
    assert (r.count, r.lib_file, r.lib_function, r.package) == (
        4,
        LIB,
        "_run_epoch",
        "transformers",
    )
    assert rows[(60, None)].package is None and rows[(700, None)].package == "x"


def sampled_session(
    n: int, line_at, *more, exact: bool = False, fixed: bool = True, seed: int = 0
) -> Session:
    """A job of ``n`` steps whose line runs ``line_at(i)`` times in step ``i`` (and line
    ``9 + k`` runs ``more[k - 1](i)`` times), watched as the Sampler places its samples
    (weights included), reduced by a Session."""
    s = Session()
    s.apply(SyncInfo(0.0, 1, False, True, 3, 200, False, exact))
    sampler = Sampler(3, 200, 1e-6, fixed=fixed, seed=seed)
    sampler.all = exact
    watched, weight = False, 1.0
    for i in range(n):
        if watched:
            counts = ((9 + k, f(i)) for k, f in enumerate((line_at, *more)))
            sites = [("item", "log.py", line, "f", "potential", c, None) for line, c in counts if c]
            s.apply(SyncBatch(1, i, True, tuple(sites), (), 0, weight))
        watched = sampler.closed(i, i * 1e-3, watched)
        weight = sampler.weight
    for lo in range(0, n, 50_000):  # the steps, packed as the hook sends them
        recs = (
            STEP_RECORD.pack(1, i, i, i + 1.0, 0, 0, 0, 0) for i in range(lo, min(n, lo + 50_000))
        )
        s.apply(StepBatch(b"".join(recs)))
    return s


LONG = 400_000
LONG_PERIODS = (10, 63)


@pytest.fixture(scope="module")
def long_run() -> Session:
    """One job of ``LONG`` steps with a line for each of ``LONG_PERIODS`` (phase 1), line
    9 + k running every ``LONG_PERIODS[k]`` steps: the schedule is the step index's, so
    each line reads as it would alone, and the 400k steps are reduced once."""
    lines = [lambda i, p=p: int(i % p == 1) for p in LONG_PERIODS]
    return sampled_session(LONG, *lines)


@pytest.mark.parametrize(
    ("period", "phase", "n"),
    [(10, 1, LONG), (63, 1, LONG), (10, 1, 30), (63, 5, 200), (7, 3, 2_000)],
)
def test_a_periodic_line_reads_its_own_rate_within_the_stated_error(request, period, phase, n):
    """A log line after ``optimizer.step()`` on iterations 0, 10, 20, … runs in steps 1,
    11, 21, …: steps 1-3 always watched read it 0.33/step unless weighed by the chance
    each watched step had. The rate must be within 3 of its stated errors, and the row
    says on how many watched steps it rests (short runs too)."""
    if n == LONG:
        rows = request.getfixturevalue("long_run").snapshot(window=None).sync
        (row,) = [r for r in rows if r.line == 9 + LONG_PERIODS.index(period)]
    else:
        snap = sampled_session(n, lambda i: int(i % period == phase)).snapshot(window=None)
        (row,) = snap.sync
    assert row.watched is not None and row.error is not None and row.seen is not None
    assert row.watched >= 3 and 1 <= row.seen <= row.watched
    assert abs(row.per_step - 1 / period) <= 3 * row.error + 1e-9
    if n >= 400_000:
        assert row.per_step == pytest.approx(1 / period, rel=0.15)
        assert row.error < 0.2 / period


def test_a_log_on_the_first_iterations_reads_its_rate_in_each_session():
    """ignite's shape: 6 formats in each of steps 1-4 of 60 (0.41 a step). The fixed
    draw read it 3.79 ±1.57 in every run; each session's seed draws other steps, and
    the first steps count as themselves: within two stated errors in each session,
    and right on average."""
    truth = 24 / 59
    rates = []
    for seed in range(40):
        session = sampled_session(60, lambda i: 6 * (1 <= i <= 4), seed=seed)
        (row,) = session.snapshot(window=None).sync
        assert abs(row.per_step - truth) <= 2 * row.error, (seed, row)
        rates.append(row.per_step)
    assert len(set(rates)) > 1  # other draws in other sessions
    assert sorted(rates)[len(rates) // 2] == pytest.approx(truth, rel=0.3)


def test_a_site_in_every_watched_step_is_a_per_step_site():
    """Seen in each watched step, drawn ones included: its count a step, not ±1.34."""
    session = sampled_session(3000, lambda i: 2)
    (row,) = session.snapshot(window=None).sync
    assert row.every_step and row.seen == row.watched > 3
    (sync,) = [r for r in session.reducers if isinstance(r, SyncReducer)]
    # no spread, but only what its drawn steps can tell (_unseen): not 0, well under 2
    floor = 2.0 * (1 - 0.0027 ** (1 / sync.n_drawn)) / 3 * (3000 - sync.n_early) / 3000
    assert row.per_step == pytest.approx(2.0) and row.error == pytest.approx(floor)
    assert 0 < row.error < 0.25 and sync.n_drawn > 3
    assert not row.exact and subtitle((row,)) == f"1 site, {row.watched} steps watched"
    (row,) = sampled_session(3000, lambda i: 1 + i % 2).snapshot(window=None).sync
    assert row.every_step and 0 < row.error < 0.5 < row.per_step


def test_a_site_on_most_steps_seen_in_each_watched_one_reads_that_rough():
    """A fuzzer's loop: a line on a random 56% of 120 steps, seen in each of its 7 watched
    steps (4 drawn: a chance of 1 in 128), read "every step ×1.00" with an error of 0,
    three errors from nothing. Seen in each watched step, a site is a per-step site with
    its count, but its error is what so few sightings can tell: in each session where it
    reads "every step", a line on 56% or 85% of the steps is within three stated errors."""
    claims = 0
    for share in (0.56, 0.85):
        for seed in range(300):
            draw = random.Random(seed).random
            on = [draw() < share for _ in range(120)]
            session = sampled_session(120, lambda i, on=on: int(on[i]), seed=seed)
            (row,) = session.snapshot(window=None).sync or (None,)
            if row is None or not row.every_step:
                continue
            claims += 1
            truth = sum(on[1:]) / 119
            assert abs(row.per_step - truth) <= 3 * row.error, (share, seed, row, truth)
    assert claims  # some sessions saw the line in each watched step


def test_a_site_whose_count_falls_after_the_draws_is_no_per_step_site():
    """L-BFGS's shape (a fuzzer's loop): 2 syncs in each of steps 1-11, 1 after, 80 steps
    (1.15 a step). The draws thin out after the first steps: where none came past the
    first quarter, "every step ×2.00" with no error was a claim on steps never looked
    at; it reads what was seen, its error as large as its rate. In each session: within
    the fuzzer's bound (three stated errors, 5% and 1 / steps: a spread over 3 drawn steps
    is a rough one), and "every step" only over a draw past step 20."""
    truth = (2 * 10 + 69) / 79
    claims = 0
    for seed in range(40):
        session = sampled_session(80, lambda i: 2 if i <= 11 else 1, seed=seed)
        (row,) = session.snapshot(window=None).sync
        (sync,) = [r for r in session.reducers if isinstance(r, SyncReducer)]
        drawn = sync.last_drawn.get(1, 0)
        assert drawn > 20 or not row.every_step, (seed, row, drawn)
        assert abs(row.per_step - truth) <= 3 * row.error + 0.05 * truth + 1 / 80, (seed, row)
        claims += row.every_step
    assert claims < 40  # some sessions draw no step past the first quarter


def test_sessions_draw_other_steps_and_ranks_the_same(monkeypatch):
    """``perftop run`` puts a random seed in the job's environment, the one every rank
    reads; without one, the ranks of a distributed job derive it from their rendezvous."""
    from perftop.hook.sync_sampler import session_seed
    from perftop.monitor.jobenv import hook_env

    a, b = hook_env("/x", base={}), hook_env("/x", base={})
    assert a["PERFTOP_SYNC_SEED"] != b["PERFTOP_SYNC_SEED"]
    assert hook_env("/x", base={"PERFTOP_SYNC_SEED": "2a"})["PERFTOP_SYNC_SEED"] == "2a"
    monkeypatch.setenv("PERFTOP_SYNC_SEED", a["PERFTOP_SYNC_SEED"])
    assert session_seed() == session_seed() == int(a["PERFTOP_SYNC_SEED"], 16)
    monkeypatch.delenv("PERFTOP_SYNC_SEED")
    assert session_seed() != session_seed()
    monkeypatch.setenv("WORLD_SIZE", "4")
    monkeypatch.setenv("MASTER_PORT", "29500")
    assert session_seed() == session_seed()
    draws = [run_sampler(Sampler(3, 50, 1e-6, fixed=True, seed=s), 3000, 1e-3, 0) for s in (1, 2)]
    assert draws[0] != draws[1] and draws[0][:3] == draws[1][:3] == [1, 2, 3]


def test_the_exact_mode_is_exact():
    snap = sampled_session(500, lambda i: int(i % 10 == 1) * 2, exact=True).snapshot(window=None)
    (row,) = snap.sync
    assert (row.count, row.watched, row.error, row.seen) == (100, 499, 0.0, 50)
    assert row.per_step == pytest.approx(100 / 499)
    assert row.exact and subtitle(snap.sync) == "1 site, exact: 499 steps"


def test_distributed_schedule_is_the_step_index_alone():
    a = sampled_session(10_000, lambda i: int(i % 9 == 0), fixed=True)
    b = sampled_session(10_000, lambda i: int(i % 9 == 0), fixed=True)
    ra, rb = a.snapshot(window=None).sync[0], b.snapshot(window=None).sync[0]
    assert (ra.per_step, ra.watched, ra.error) == (rb.per_step, rb.watched, rb.error)


def test_the_report_says_what_a_rate_rests_on():
    """JSON: the watched steps, the standard error and the steps seen in, beside the old
    keys; text: rate ± error, 'about 1 in N steps' for a site seen in few watched steps,
    and the watched steps in the title (or that every step was watched)."""
    from perftop.report.build import build_report
    from perftop.report.text import render

    rep = build_report(sampled_session(40_000, lambda i: int(i % 10 == 1)).snapshot(window=None))
    (log,) = rep["sync_events"]
    assert {"per_step", "count", "watched_steps", "per_step_error", "seen_steps"} <= set(log)
    assert log["watched_steps"] > 100 and log["seen_steps"] >= 10
    assert 0 < log["per_step_error"] < log["per_step"]
    text = render(rep)
    assert f"per step over {log['watched_steps']} watched steps, ± one standard error" in text
    assert f"{log['per_step']:.2f} ±{log['per_step_error']:.2f}" in text

    rep = build_report(sampled_session(30_000, lambda i: int(i % 63 == 5)).snapshot(window=None))
    (rare,) = rep["sync_events"]
    assert 0 < rare["seen_steps"] < 10 and rare["per_step_error"] < rare["per_step"]
    assert f"about 1 in {round(1 / rare['per_step'])} steps" in render(rep)

    exact = sampled_session(300, lambda i: int(i % 10 == 1), exact=True).snapshot(window=None)
    text = render(build_report(exact))
    # 300 steps, every one watched from step 1 (step 0 is whole only once it has ended)
    assert "exact: 299 steps watched, every one but the first" in text and "±" not in text


def test_an_early_rate_says_what_was_seen_not_an_error_as_large_as_itself():
    """Issue 45 item 4: a site seen in each of the first 5 watched steps (3 sure, 2 drawn:
    too few to call it "every step") read "1.00 ±0.98", and a rare one "0.01 ±0.94". Where
    the sampling cannot back a rate yet, the screen and the report say what was seen."""
    from perftop.report.build import build_report
    from perftop.report.text import render

    (site,) = sampled_session(100, lambda i: 1).snapshot(window=None).sync
    assert (site.seen, site.watched, site.every_step) == (5, 5, False)
    assert site.error is not None and site.error > 0.5  # the estimate itself is kept (JSON)
    assert sync_rate(site.per_step, site.error, site.seen, every=False, watched=5) == (
        "in 5 of 5 watched steps"
    )
    assert sync_rate(0.01, 0.94, 1, short=True, watched=40) == "1/40 watched"
    text = render(build_report(sampled_session(100, lambda i: 1).snapshot(window=None)))
    assert "in 5 of 5 watched steps" in text and "±0.9" not in text
    # once enough steps were drawn, the rate and its error again
    (late,) = sampled_session(30_000, lambda i: int(i % 2 == 0)).snapshot(window=None).sync
    shown = sync_rate(late.per_step, late.error, late.seen, watched=late.watched)
    assert "±" in shown and "watched" not in shown


def test_passes_between_steps_with_no_sync_listed_say_how_many_were_watched():
    """A torchrl PPO's rollouts (1,000 environment steps each) never fit a pass watch's
    budget: the report listed no sync between steps and said nothing, as if there were
    none. It says how many of the passes were watched whole."""
    from perftop.events import Between
    from perftop.report.build import build_report
    from perftop.report.text import render

    def run(watched_passes: int) -> str:
        s = Session()
        s.apply(SyncInfo(0.0, 1, False, True, 3, 200))
        for i in range(30):
            s.apply(Step(1, i, i * 1.0, i + 0.5))
            if i in (1, 2, 3):
                s.apply(SyncBatch(1, i, True, (), (), 0, 1.0))
            if i % 10 == 9:
                s.apply(Between(1, "rollout", i + 0.5, 0.4))
        for _ in range(watched_passes):  # a pass watched on its own draw: no syncs in it
            s.apply(SyncBatch(1, 29, False, (), (), 1, 1.0))
        rep = build_report(s.snapshot(window=None))
        assert rep["sync_watch"]["passes_watched"] == watched_passes
        return render(rep).split("Host-device syncs between training steps\n", 1)[1]

    assert run(0).startswith("  no pass of the 3 watched whole: a watch has a budget")
    assert run(1).startswith("  none seen in the 1 pass watched whole of 3\n")
    assert run(2).startswith("  none seen in the 2 passes watched whole of 3\n")


def test_passes_watched_of_every_process_are_out_of_every_processs_passes():
    """Two ranks, 3 rollouts each, 4 of them watched whole: the watch counts every
    process's passes, so the passes it is out of are every process's too ("4 of 6"), not
    the primary's 3 (which read "4 passes watched whole of 3")."""
    from perftop.events import Between
    from perftop.report.build import build_report
    from perftop.report.text import render

    s = Session()
    s.apply(SyncInfo(0.0, 1, False, True, 3, 200))
    for pid in (1, 2):
        for i in range(30):
            s.apply(Step(pid, i, i * 1.0, i + 0.5))
            if i in (1, 2, 3):
                s.apply(SyncBatch(pid, i, True, (), (), 0, 1.0))
            if i % 10 == 9:
                s.apply(Between(pid, "rollout", i + 0.5, 0.4))
        for _ in range(2):
            s.apply(SyncBatch(pid, 29, False, (), (), 1, 1.0))
    snap = s.snapshot(window=None)
    assert snap.passes_run == 6 and snap.sync_watch.passes == 4
    assert snap.between[0].count == 3  # the primary's own
    rep = build_report(snap)
    assert rep["sync_watch"]["passes_run"] == 6
    text = render(rep).split("Host-device syncs between training steps\n", 1)[1]
    assert text.startswith("  none seen in the 4 passes watched whole of 6\n"), text
