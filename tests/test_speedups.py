"""The C fast path (perftop.hook._speedups) behaves as the pure-Python reference."""

from __future__ import annotations

import random
import subprocess
import sys
import time

import pytest

from perftop.hook.steps import StepTracker
from perftop.monitor.runner import hook_env
from tests.conftest import c_tracker_class
from tests.helpers import WORKLOADS, run_and_report

# The tracker's state (its slots, less the callbacks): both implementations must agree.
ATTRS = [a for a in StepTracker.__slots__ if a != "emit" and not a.startswith("on_")]


def _drive(cls: type, seed: int, fail_at: int | None = None) -> list:
    """A random loop on a tracker with every callback set; everything it did, in order."""
    rng = random.Random(seed)
    log: list = []
    n_emit = [0]

    def emit(step):
        n_emit[0] += 1
        if n_emit[0] == fail_at:
            raise ValueError("emit failed")
        log.append(("step", step))

    tr = cls(emit)
    tr.on_close = lambda i, t: log.append(("close", i, t))
    tr.on_fetched = lambda: log.append(("fetched",))
    tr.on_settle = lambda: log.append(("settle",))
    tr.on_step = lambda i, t: (log.append(("on_step", i)), rng.choice([None, 0, i + 1, i + 3]))[1]
    t = 0.0
    ops = ["fetch", "bwd", "opt", "opt2", "explicit", "phase", "stop", "idle"]
    weights = [5, 5, 3, 1, rng.choice([0, 1]), 1, 1, 2]
    if seed % 5 < 2:  # loops without an optimizer: loader only, loader and backward
        weights[1:5] = [5 * (seed % 5), 0, 0, 0]
    for _ in range(rng.randrange(20, 400)):
        op = rng.choices(ops, weights)[0]
        dt = rng.choice([0.001, 0.01, 0.25, 0.5, 3.0])
        try:
            if op in ("fetch", "stop"):
                tr.fetched(t, t + dt, op == "fetch")
            elif op == "bwd":
                tr.backward(t, t + dt)
            elif op in ("opt", "opt2"):
                tr.optimizer_pre(t)
                tr.optimizer_post(1 if op == "opt" else 2, t + dt)
            elif op == "explicit":
                tr.explicit(t)
            elif op == "phase":
                tr.phase(rng.choice(["fwd", "loss"]), t, t + dt)
        except ValueError as exc:
            log.append(("raised", op, str(exc)))
        t += dt
        log.append(tuple(getattr(tr, a) for a in ATTRS))
    tr.flush()
    log.append(tuple(getattr(tr, a) for a in ATTRS))
    return log


@pytest.mark.parametrize("seed", range(40))
def test_c_tracker_does_what_the_python_one_does(seed):
    c = c_tracker_class()
    fail_at = 5 if seed % 4 == 0 else None  # an emit that raises mid-way, sometimes
    assert _drive(c, seed, fail_at) == pytest.approx(_drive(StepTracker, seed, fail_at))


def test_attributes_and_reset():
    tr = c_tracker_class()(print)
    ref = StepTracker(print)
    assert {a: getattr(tr, a) for a in ATTRS} == {a: getattr(ref, a) for a in ATTRS}
    tr.fetched(1.0, 2.0)
    tr.optimizer_post(5, 3.0)
    tr.on_step = tr.on_close = None
    tr.start, tr.primary_opt = None, None
    assert tr.start is None and tr.primary_opt is None
    tr.reset()
    assert {a: getattr(tr, a) for a in ATTRS} == {a: getattr(ref, a) for a in ATTRS}


def test_clock_is_perf_counter():
    from perftop.hook import _speedups

    c_tracker_class()
    for _ in range(100):
        a = time.perf_counter()
        b = _speedups.clock()
        assert a <= b <= time.perf_counter()


def _wrapped(fn, tracker):
    from perftop.hook import _speedups

    return _speedups.wrap_backward(fn, tracker)


def test_wrappers_time_the_call_and_keep_its_outcome():
    from perftop.hook import _speedups

    tr = c_tracker_class()(print)
    w = _wrapped(lambda *a, **k: (a, k), tr)
    assert w(1, 2, x=3) == ((1, 2), {"x": 3})
    assert tr.mode == 2 and tr.has_bwd and tr.bwd > 0

    def boom():
        raise KeyError("user error")

    with pytest.raises(KeyError, match="user error"):
        _wrapped(boom, tr)()

    class It:  # bound like a function on a class; StopIteration passes through
        def __init__(self):
            self.n = 2

        def __iter__(self):
            return self

        def __next__(self):
            if not self.n:
                raise StopIteration
            self.n -= 1
            return self.n

    tr = c_tracker_class()(print)
    It.__next__ = _speedups.wrap_next(It.__next__, tr)
    assert list(It()) == [1, 0]
    assert next(iter(It())) == 1 and It().__next__() == 1
    assert tr.mode == 1 and tr.data > 0


def test_wrapper_errors_go_to_on_error_never_to_the_caller():
    seen = []
    tr = c_tracker_class()(print)
    tr.on_error = lambda where: seen.append((where, repr(sys.exc_info()[1])))
    tr.held = "not a list"  # the next step close fails inside the tracker
    w = _wrapped(lambda: 42, tr)
    assert w() == 42 and w() == 42
    assert seen == [("backward", "TypeError('StepTracker.held must be a list')")]
    assert sys.exc_info() == (None, None, None)
    tr.on_error = None  # nobody to tell: still silent
    assert w() == 42


@pytest.mark.parametrize("pure", ["0", "1"])
def test_fork_resets_the_tracker(tmp_path, pure):
    code = (
        "import os, torch, perftop.hook as h\n"
        "from perftop.hook import impl\n"
        "m = torch.nn.Linear(2, 1); o = torch.optim.SGD(m.parameters(), lr=0.1)\n"
        "for _ in range(5):\n"
        "    o.zero_grad(); m(torch.randn(4, 2)).sum().backward(); o.step()\n"
        "t = h.state().tracker\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    print('child', t.index, t.start, t.settled, flush=True); os._exit(0)\n"
        "os.waitpid(pid, 0)\n"
        "print('parent', t.index, impl.NAME)\n"
    )
    c_tracker_class()
    r = subprocess.run(
        [sys.executable, "-c", code],
        env=dict(hook_env(tmp_path / "x.sock"), PERFTOP_PURE=pure),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "child 0 None False"
    assert lines[1] == "parent 5 " + ("Python" if pure == "1" else "C (perftop.hook._speedups)")


@pytest.mark.parametrize("pure", ["1", "0"])
def test_implementation_choice(pure, monkeypatch):
    monkeypatch.setenv("PERFTOP_PURE", pure)
    code = "from perftop.hook import impl, state; print(impl.NAME)"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.stdout.strip() == ("Python" if pure == "1" else "C (perftop.hook._speedups)")


def test_missing_extension_falls_back_silently():
    code = (
        "import sys; sys.modules['perftop.hook._speedups'] = None\n"  # import fails
        "import perftop.hook as h; from perftop.hook import impl, steps\n"
        "st = h.install('/nonexistent.sock')\n"
        "print(impl.NAME, type(st.tracker) is steps.StepTracker)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert (r.returncode, r.stderr, r.stdout.strip()) == (0, "", "Python True")


def test_same_steps_in_a_real_run_either_way(tmp_path, monkeypatch):
    c_tracker_class()
    reports = {}
    for pure in ("1", "0"):
        monkeypatch.setenv("PERFTOP_PURE", pure)
        d = tmp_path / pure
        d.mkdir()
        proc, r = run_and_report(d, sys.executable, str(WORKLOADS / "loader_train.py"), "10")
        assert proc.returncode == 0, proc.stderr
        reports[pure] = r
    for r in reports.values():
        assert r["steps"]["count"] == 10 and r["dropped_events"] == 0
        assert set(r["steps"]["phases_s"]) == {"data", "forward/other", "backward", "optimizer"}
        assert all(v > 0 for v in r["steps"]["phases_s"].values())
        assert sorted(p["role"] for p in r["processes"]) == ["main", "worker", "worker"]
