"""RL rollouts are not evaluations (issue 44 item 2): real runs under ``perftop run``.

stable-baselines3's PPO on CartPole-v1: each rollout after the first update (the first
comes before any training: in no step and no interval) is one ``rollout`` pass named by
``collect_rollouts``, its time within 10% + 0.5 ms of SB3's own timer, the steps SB3's
updates, the exit code and what it computed unchanged. DQN (a few environment steps
between single updates): a ``rollout`` pass between each two updates, inside the program's
own ``train()`` timers. A hand-written loop
(tests/workloads/rollout_loop.py): a gymnasium environment's rollout is a ``rollout``, an
``estimate_loss`` and a rollout of a plain class (not an environment) stay ``eval``, each
named by its function; a few env steps between single updates (DQN's shape) are a
rollout pass each time, not the steps' own work; under the user's own profiler, perftop
sets none (that rollout's site was one before: it is a rollout without a look)."""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
from typing import Any

import pytest

from perftop.events import Between, BetweenOpen, Step
from perftop.recording import read_events
from perftop.report.build import session_from_file
from perftop.tui.widgets.steps import between_line
from tests.helpers import WORKLOADS, needs, perftop, run_and_report
from tests.plainrun import run_plain

needs("stable_baselines3", "gymnasium")


def _own(proc: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    return json.loads(next(ln for ln in proc.stdout.splitlines() if ln.startswith("{")))


def _passes(d: Any) -> list[Between]:
    return [e for e in read_events(str(d / "r.perftop")) if isinstance(e, Between)]


def _steps(d: Any) -> list[Step]:
    return [e for e in read_events(str(d / "r.perftop")) if isinstance(e, Step)]


def _booked(steps: list[Step], end: float) -> float:
    """The data wait booked by the step a pass ending at ``end`` is cut out of (the first
    to end after it: a step's t0 is its start plus the hole), 0 after the last pass. The
    pass's end may come that much before the loop's next work began: the thread's time off
    the CPU after the pass's last module call, at most a typical step's wait, is that
    step's wait (on a busy host, a preemption there; docs/steps.md)."""
    after = [s for s in steps if s.t1 >= end]
    return min(after, key=lambda s: s.t1).data if after else 0.0


def _close(got: float, want: float) -> bool:
    return abs(got - want) <= 0.1 * want + 0.0005


@pytest.fixture(scope="module")
def ppo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, ...]:
    d = tmp_path_factory.mktemp("ppo")
    script = str(WORKLOADS / "sb3_ppo.py")
    plain = run_plain([sys.executable, script])
    proc, rep = run_and_report(d, sys.executable, script)
    text = perftop("report", str(d / "r.perftop"), cwd=d)
    assert text.returncode == 0, text.stderr
    snap = session_from_file(str(d / "r.perftop")).snapshot()
    opens = [e for e in read_events(str(d / "r.perftop")) if isinstance(e, BetweenOpen)]
    text_out = text.stdout + "\n" + between_line(snap.between).plain
    return plain, proc, rep, _passes(d), text_out, opens


@pytest.fixture(scope="module")
def loop(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, ...]:
    d = tmp_path_factory.mktemp("loop")
    proc, rep = run_and_report(d, sys.executable, str(WORKLOADS / "rollout_loop.py"))
    assert proc.returncode == 0, proc.stderr
    return _own(proc), rep, _passes(d), _steps(d)


def _off_policy(tmp_path_factory: pytest.TempPathFactory, algo: str) -> tuple[Any, ...]:
    """``tests/workloads/sb3_ALGO.py`` plainly and under perftop, both exiting 0 and the
    second computing what the first did: its own counters, the report, passes and steps."""
    d = tmp_path_factory.mktemp(algo)
    script = str(WORKLOADS / f"sb3_{algo}.py")
    plain = run_plain([sys.executable, script])
    proc, rep = run_and_report(d, sys.executable, script)
    assert proc.returncode == plain.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[0] == plain.stdout.splitlines()[0]  # what it computed
    return _own(proc), rep, _passes(d), _steps(d)


def _rollouts(passes: list[Between], trains: list[Any]) -> list[Between]:
    """The rollout passes, one between each two ``train()`` calls; any other pass is the
    one-off evaluation at step 1 (a target computed with grad off right after the first
    optimizer's first step, before a step has seen it: a known limit), before them all."""
    rolls = [p for p in passes if p.kind == "rollout"]
    assert len(rolls) == len(trains) - 1, passes
    others = [p for p in passes if p.kind != "rollout"]
    assert len(others) <= 1 and all(p.t0 < rolls[0].t0 for p in others), passes
    return rolls


@pytest.fixture(scope="module")
def dqn(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, ...]:
    return _off_policy(tmp_path_factory, "dqn")


@pytest.fixture(scope="module")
def sac(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, ...]:
    return _off_policy(tmp_path_factory, "sac")


@pytest.fixture(scope="module")
def td3(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, ...]:
    return _off_policy(tmp_path_factory, "td3")


def _collect_line(on: bool = True) -> int:
    """The line in SB3's collect_rollouts that steps the environment (a rollout's name), of
    the on-policy algorithms (PPO) or the off-policy ones (DQN)."""
    from stable_baselines3.common.off_policy_algorithm import OffPolicyAlgorithm
    from stable_baselines3.common.on_policy_algorithm import OnPolicyAlgorithm

    algo = OnPolicyAlgorithm if on else OffPolicyAlgorithm
    lines, first = inspect.getsourcelines(algo.collect_rollouts)
    return next(first + i for i, ln in enumerate(lines) if "env.step(" in ln)


def test_ppo_rollouts_are_rollouts_named_by_collect_rollouts(ppo):
    plain, proc, rep, passes, *_ = ppo
    assert proc.returncode == plain.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[0] == plain.stdout.splitlines()[0]  # what it computed
    own = _own(proc)
    s = rep["steps"]
    assert s["count"] == own["steps"] == 32
    want = own["rollouts"][1:]  # the first rollout comes before any training
    assert [p.kind for p in passes] == ["rollout"] * len(want), passes
    for p, w in zip(passes, want, strict=True):
        assert _close(p.length, w), (p, w)
    # SB3's EvalCallback ran inside the 2nd and 3rd rollouts (its own timer): part of their
    # pass, no pass of its own
    assert [i for i, _ in own["evals"]] == [1, 2], own["evals"]
    for i, t in own["evals"]:
        assert 0.0 < t <= passes[i - 1].length, (passes[i - 1], t)
    row = s["between_s"]["rollout"]
    assert row["count"] == len(want) and "eval" not in s["between_s"]
    assert _close(row["total_s"], sum(want)), (row, want)
    assert (
        row["site"]
        == f"collect_rollouts (stable_baselines3/common/on_policy_algorithm.py:{_collect_line()})"
    )
    assert 0.0 < row["forward_s"] < row["measured_s"] == row["total_s"]


def test_ppo_report_names_the_rollouts_and_their_function(ppo):
    """The text report and the Steps panel say what the time between steps was and which
    code spent it; nothing says to evaluate less often (the rule's rollout advice:
    tests/test_hints_rules_more.py)."""
    _, _, rep, passes, text, _ = ppo
    line = next(ln for ln in text.splitlines() if "between steps (not in any step)" in ln)
    assert "rollout " in line and f"({len(passes)}×)" in line, line
    assert "rollout: forward calls amid env steps, made from collect_rollouts (" in text, text
    assert "inside the model's forward calls" in text
    assert "Evaluate less often" not in text + json.dumps(rep)
    panel = text.splitlines()[-1]  # the Steps panel's line, from the recording's snapshot
    # (the library's path from its package's folder, cut from the left to fit: its file and
    # line stay)
    assert "rollout " in panel and "in collect_rollouts (…/on_policy_algorithm.py:" in panel


def test_ppo_a_running_rollout_is_said_to_be_one(ppo):
    """While it runs, a rollout is announced as one (the live view, the stall watch's
    ``during``): from its open where its call site's pass was a rollout before, else from
    its first environment step (an announcement again, same start)."""
    passes, opens = ppo[3], ppo[5]
    assert passes
    for i, p in enumerate(passes):
        said = [o.kind for o in opens if abs(o.t0 - p.t0) < 1e-6]
        assert said and said[-1] == "rollout", (p, said)
        if i:
            assert said == ["rollout"], (p, said)


def _between_trainings(
    passes: list[Between], trains: list[Any], rollouts: list[Any], steps: list[Step]
) -> tuple[float, float]:
    """Each rollout pass lies between one ``train()``'s exit and the next one's (the
    program's own timers, same clock: ±0.5 ms), ends inside the next ``train()`` (or before
    it by the wait the next step booked, :func:`_booked`) and starts before its rollout
    ends; their total, with those waits, is at least the gaps between the ``train()`` calls
    (within 10% + 0.5 ms a pass). Returns (the passes' total, the gaps')."""
    tol = 0.0005
    after = [r for r in rollouts if r[0] > trains[0][1]]  # the rollouts between updates
    booked = 0.0
    for p, (_, out), (into, nxt), (_, r_end) in zip(
        passes, trains[:-1], trains[1:], after, strict=True
    ):
        end = p.t0 + p.length
        wait = _booked(steps, end)
        booked += wait
        assert out - tol <= p.t0 <= r_end + tol and into - tol - wait <= end <= nxt + tol, (
            p, out, into, nxt, r_end, wait)  # fmt: skip
    gaps = sum(b[0] - a[1] for a, b in zip(trains[:-1], trains[1:], strict=True))
    total = sum(p.length for p in passes)
    assert 0.9 * gaps - tol * len(passes) <= total + booked, (total, booked, gaps)
    return total, gaps


def test_dqn_rollouts_between_single_updates(dqn):
    """DQN (4 environment steps, then one update): the steps are SB3's updates, and each
    stretch between two updates is one ``rollout`` pass named by the off-policy
    ``collect_rollouts``: updates - 1 of them (the rollouts before the first update are in
    no step; the job ends with an update, so none comes after the last). A pass runs from
    the rollout's first forward call with grad off (the policy's, in ``predict``) to the
    next update's first forward with grad on (``q_net``, after its replay sample and the
    target network's forward with grad off): so each lies between one ``train()``'s exit
    and the next one's (the program's own timers, same clock: ±0.5 ms), ends inside the
    next ``train()`` and starts before its rollout ends; their total is at least the gaps
    between the ``train()`` calls (within 10% + 0.5 ms a pass: the code before the first
    forward, and a slice the host's scheduler takes there, is the next step's) and at most
    those gaps plus the next calls' own time."""
    own, rep, passes, steps = dqn
    trains, rollouts = own["trains"], own["rollouts"]
    s = rep["steps"]
    assert s["count"] == own["updates"] == len(trains) == 75, (
        s["count"],
        own["updates"],
        len(trains),
    )
    assert len(passes) == own["updates"] - 1, passes
    assert {p.kind for p in passes} == {"rollout"}
    assert {p.site for p in passes} == {
        f"collect_rollouts (stable_baselines3/common/off_policy_algorithm.py:{_collect_line(on=False)})"
    }
    total, gaps = _between_trainings(passes, trains, rollouts, steps)
    assert all(0.0 < p.forward_s < p.length for p in passes), passes
    calls = sum(b - a for a, b in trains[1:])
    assert total <= gaps + calls, (total, gaps, calls)
    row = s["between_s"]["rollout"]
    assert row["count"] == len(passes) and list(s["between_s"]) == ["rollout"]
    assert abs(row["total_s"] - total) < 1e-3
    assert rep["stalls"] == [] and not s["cut_short"]
    assert "input-bound" not in {h["id"] for h in rep["hints"]}


def test_hand_written_loop_kinds_and_names(loop):
    """Each pass's kind and function exactly; each pass begins between the last update's
    optimizer step and the function's first forward call (the function's own lines before
    that call, a preemption there on a busy host, are the next step's: 1.2 ms once under
    load), ends in the next update's first forward (the loop's clock before and after it:
    a preemption between its clock and perftop's inside the call, 16 ms once under load, is
    the pass's) and covers the function's return; each kind's time (its passes' sum) within
    10% + 0.5 ms a pass of the loop's own time from one update's end to the next one's
    first forward (the call's start, or its return: the longest), not of the function's timer
    (whatever else is between two steps, a collection of the garbage or a preemption on a
    busy host, is between them: 8 ms more than the timer once on CI). A pass's end may
    come before the function's return by the wait the next step books before its forward
    (the thread's time off the CPU after the pass's last module call, at most a typical
    step's wait: on a busy host a preemption there; docs/steps.md)."""
    own, rep, passes, steps = loop
    assert rep["steps"]["count"] == own["steps"]
    kinds = {"rollout": "rollout", "eval": "eval", "plain": "eval", "profiled": "rollout"}
    # a rollout by the function that steps the env, not act(), which calls the policy (the
    # user's profiler on: nothing looked into, but the site's passes were rollouts before,
    # and its passes are from then on, named as they were)
    names = {"eval": "estimate_loss (", "plain": "plain_rollout ("}
    _as_own_timers(own, passes, steps, kinds, names, "rollout_loop.py:")
    assert own["profile"] == "None"  # no profile function left behind
    assert own["kept"]  # the user's own profiler untouched


def _as_own_timers(
    own: dict[str, Any],
    passes: list[Between],
    steps: list[Step],
    kinds: dict[str, str],
    names: dict[str, str],
    file: str,
) -> None:
    """Each pass of a hand-written loop against the loop's own timers (the test above)."""
    assert len(passes) == len(own["passes"]), (passes, own["passes"])
    tol = 0.001
    got: dict[str, list[float]] = {}
    want: dict[str, list[float]] = {}
    for p, (what, a, b, first, waited) in zip(passes, own["passes"], strict=True):
        # a preemption between the loop's timer and the call perftop sees (a loaded host's)
        t = tol + waited
        assert p.kind == kinds[what], (p, what)
        assert p.site.startswith(names.get(what, "rollout (")) and file in p.site, p
        assert 0.0 < p.forward_s < p.length
        last, out = max((u[1], u[2]) for u in own["updates"] if u[1] <= a)
        into, called = min((u[0], u[3]) for u in own["updates"] if u[0] >= b)
        end = p.t0 + p.length
        booked = _booked(steps, end)
        assert a <= first <= b
        assert last - t <= p.t0 <= first + t and b - t - booked <= end <= called + t, (
            p, what, last, a, first, b, into, called, booked, waited)  # fmt: skip
        got.setdefault(what, []).append(p.length)
        # the loop's own time between steps, to the next update's first forward call; less
        # what the pass's end may leave out (as above: the next step's wait, a preemption)
        want.setdefault(what, []).append((into - out, called - out, booked + waited))
    for what, spans in want.items():
        lo, hi = sum(s[0] for s in spans), sum(s[1] for s in spans)
        tol = 0.1 * lo + 0.0005 * len(spans)
        short = sum(s[2] for s in spans)
        assert lo - tol - short <= sum(got[what]) <= hi + tol, (what, got[what], spans)


def test_a_site_that_steps_no_environment_is_looked_into_three_times(loop):
    """The profile function between forward calls costs a pass ~0.1-0.2 ms: estimate_loss's
    site is looked into in its first three passes (an environment library is imported), and
    in none after (the call before the first step is in no pass: not looked into)."""
    own = loop[0]
    assert own["looked"] == [False, True, True, True, False], own["looked"]


@pytest.fixture(scope="module")
def eval_mode(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, ...]:
    d = tmp_path_factory.mktemp("eval_mode")
    script = str(WORKLOADS / "eval_mode_rollouts.py")
    plain = run_plain([sys.executable, script])
    proc, rep = run_and_report(d, sys.executable, script)
    assert proc.returncode == plain.returncode == 0, proc.stderr
    opens = [e for e in read_events(str(d / "r.perftop")) if isinstance(e, BetweenOpen)]
    return _own(proc), rep, _passes(d), _steps(d), opens


def test_rollouts_with_grad_on_in_eval_mode(eval_mode):
    """tianshou's collectors call the policy with grad on, in eval mode
    (tests/workloads/eval_mode_rollouts.py): each collection after the first update, the
    test collections and DQN's few environment steps between single updates, is a
    ``rollout`` pass named by the function that steps the environment, against the loop's
    own timers as the hand-written loop's above (they were inside the next step, no pass).
    A model trained in eval mode (frozen BatchNorm) and an evaluation in eval mode with
    grad on, stepping no environment, stay in the steps: no pass overlaps them."""
    own, rep, passes, steps, opens = eval_mode
    assert rep["steps"]["count"] == own["steps"] == len(steps) == 48
    kinds = {"rollout": "rollout", "test": "rollout"}
    names = {"rollout": "collect (", "test": "collect ("}
    *passes, ev, roll = passes  # the pair, last: checked below
    _as_own_timers(own, passes, steps, kinds, names, "eval_mode_rollouts.py:")
    assert len({p.site for p in passes}) == 1
    # An evaluation with grad off, then a collection in eval mode with grad on, no step
    # between: the collection's first forward ends the evaluation's pass and begins the
    # rollout's (two intervals of one stretch, as the kinds differ).
    e0, e1, f, r1 = own["spans"].pop("pair")
    tol = 0.001
    assert (ev.kind, roll.kind) == ("eval", "rollout") and roll.site == passes[0].site
    assert e0 - tol <= ev.t0 <= e1 and abs(ev.t0 + ev.length - roll.t0) < 1e-6, (ev, roll)
    assert e1 - tol <= roll.t0 <= f + tol and roll.t0 + roll.length >= r1 - tol, (roll, own)
    for name, (a, b) in own["spans"].items():
        assert not [p for p in passes if p.t0 < b and p.t0 + p.length > a], (name, passes)
        assert [s for s in steps if a <= s.t0 and s.t1 <= b] or name == "evaluate", name
    for p in passes:  # the first said to be one at its first environment step, then at once
        said = [o.kind for o in opens if abs(o.t0 - p.t0) < 1e-6]
        assert said and said[-1] == "rollout", (p, said)
    row = rep["steps"]["between_s"]["rollout"]
    assert row["count"] == len(passes) + 1 and rep["steps"]["between_s"]["eval"]["count"] == 1


def test_sac_rollouts_between_trainings_of_three_optimizers(sac):
    """SAC: three optimizers a gradient step, each after its own backward; the first to
    step (the entropy coefficient's) closes steps, so the last (the actor's) ends an
    iteration inside a step. A rollout after it (10 environment steps) was folded into the
    next step (every third step 3-4 ms longer, no pass): a forward with grad off right
    after another optimizer's step may begin a pass. Each stretch between two ``train()``
    calls is now one ``rollout`` pass, as DQN's (above). (The critic's target, computed
    with grad off right after the first optimizer's first step, reads as an evaluation
    once, at step 1, before it is seen in a step before: a known limit, allowed here.)"""
    own, rep, passes, steps = sac
    trains, rollouts = own["trains"], own["rollouts"]
    s = rep["steps"]
    assert s["count"] == own["updates"] == 3 * len(trains) == 90
    rolls = _rollouts(passes, trains)
    site = f"collect_rollouts (stable_baselines3/common/off_policy_algorithm.py:{_collect_line(on=False)})"
    assert {p.site for p in rolls} == {site}
    _between_trainings(rolls, trains, rollouts, steps)
    assert s["between_s"]["rollout"]["count"] == len(rolls)


def test_td3_target_forward_after_a_rollout_stays_in_its_steps(td3):
    """TD3: the target networks' forward with grad off begins each gradient step; after a
    rollout it falls inside the rollout's pass (which ends at the critic's forward with
    grad on), so its site was not seen in the step before the training's second gradient
    step, and there it read as an evaluation: once a training (29 "eval" passes beside
    29 rollouts). A forward with grad off inside a pass now counts as met in that stretch:
    the rollouts alone (and the one-off evaluation at step 1 allowed, as SAC's)."""
    own, rep, passes, _ = td3
    trains = own["trains"]
    assert rep["steps"]["count"] == own["updates"] == 4 * len(trains) == 120
    _rollouts(passes, trains)


def test_a_rollout_seen_inside_a_wrapper_is_named_by_its_loop(tmp_path):
    """The environment is a wrapper whose ``step`` calls a module (torchrl's transforms are
    modules, inside ``EnvBase.step``), and each collection steps it before the policy acts
    (tests/workloads/nested_env_rollouts.py): the first step a pass sees is the inner
    environment's, called by the wrapper. The rollouts were named by the wrapper's
    ``step``; they are named by the loop that steps the wrapper."""
    proc, rep = run_and_report(tmp_path, sys.executable, str(WORKLOADS / "nested_env_rollouts.py"))
    assert proc.returncode == 0, proc.stderr
    own = _own(proc)
    assert rep["steps"]["count"] == own["steps"] == 18
    passes = _passes(tmp_path)
    assert len(passes) == 5 and {p.kind for p in passes} == {"rollout"}, passes
    assert {p.site for p in passes} == {f"collect (nested_env_rollouts.py:{own['line']})"}


def test_a_rollout_with_much_work_before_its_env_step_is_one(tmp_path):
    """RLlib's env runner: thousands of small calls (its connector pipelines) between the
    policy's forward calls and the environment's ``step``
    (tests/workloads/connector_rollouts.py, ~1,500 calls). The profile function's budget
    of 2,048 events a pass ran out first, so each collection read as an evaluation (RLlib
    2.60's PPO: its first two rollouts between updates, the first of them for good); every
    one is a rollout named by the function that steps the environment."""
    proc, rep = run_and_report(tmp_path, sys.executable, str(WORKLOADS / "connector_rollouts.py"))
    assert proc.returncode == 0, proc.stderr
    own = _own(proc)
    assert rep["steps"]["count"] == own["steps"] == 18
    passes = _passes(tmp_path)
    assert len(passes) == own["rollouts"] == 5 and {p.kind for p in passes} == {"rollout"}
    assert {p.site for p in passes} == {f"sample (connector_rollouts.py:{own['line']})"}
    assert rep["steps"]["between_s"]["rollout"]["count"] == 5


def test_rollouts_of_environments_in_processes_of_their_own(tmp_path):
    """SB3's ``SubprocVecEnv``: each environment in a process multiprocessing's forkserver
    started (tests/workloads/sb3_subproc.py). Each rollout after the first update is one
    ``rollout`` pass named by ``collect_rollouts``, the steps its optimizer's; the
    environments' processes are named by what started them (``-c
    multiprocessing.forkserver``: they had read "python -c", as the resource tracker)."""
    proc, rep = run_and_report(tmp_path, sys.executable, str(WORKLOADS / "sb3_subproc.py"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    own = _own(proc)
    assert rep["steps"]["count"] == own["steps"] == 80
    passes = _passes(tmp_path)
    assert len(passes) == own["rollouts"] - 1 == 9 and {p.kind for p in passes} == {"rollout"}
    assert {p.site.split(" (")[0] for p in passes} == {"collect_rollouts"}, passes
    text = perftop("report", str(tmp_path / "r.perftop"), cwd=tmp_path).stdout
    rows = {ln.split()[0]: ln for ln in text.splitlines() if ln[:2] == "  " and ln.split()}
    for pid in own["envs"]:
        assert "-c multiprocessing.forkserver" in rows[str(pid)], (pid, text)
