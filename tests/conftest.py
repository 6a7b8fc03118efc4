"""Shared fixtures. Subprocesses must import this checkout's perftop, not an installed one."""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from collections import Counter
from pathlib import Path

import pytest

from perftop import gc_settle

ROOT = Path(__file__).resolve().parent.parent
os.environ["PYTHONPATH"] = os.pathsep.join(
    [str(ROOT), *[p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]]
)
# Workloads that call plain `python` (a shell script) get this interpreter.
os.environ["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
# Keep small CPU trainings quick and quiet on 2-core CI machines.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("PYTHONWARNINGS", "ignore")
# stable-baselines3 makes a log folder for every model it trains, quiet or not (the temp
# folder's SB3-<time>): the suite's RL jobs share one of this test process's, removed at its
# end, instead of leaving ~150 in the machine's /tmp.
if "SB3_LOGDIR" not in os.environ:
    os.environ["SB3_LOGDIR"] = tempfile.mkdtemp(prefix="perftop-tests-sb3-")
    atexit.register(shutil.rmtree, os.environ["SB3_LOGDIR"], True)
# Each test process its own tmux server: the default one exits with its last session, so a
# test in one worker ending its terminal could take another worker's new one with it (a CI
# run read a terminal test's screen empty for 60 s).
if "TMUX_TMPDIR" not in os.environ or os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ["TMUX_TMPDIR"] = tempfile.mkdtemp(prefix="perftop-tests-tmux-")
    atexit.register(shutil.rmtree, os.environ["TMUX_TMPDIR"], True)
# A container's PYTHONDONTWRITEBYTECODE=1 (CI's Debian image sets it) made each of the
# hundreds of Python processes the suite starts compile this checkout's modules again (an
# editable install has no bytecode of its own: +0.25 CPU-s a hooked job, +0.1 a monitor)
# and each test worker rewrite every test module: cache bytecode, as a user's install does.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False

# The real recordings and runs (session-scoped, read-only) are defined once here, so every module
# that asks for them shares one set: a fixture imported into each module would be built
# again for each.
from tests.capture_run import real_capture  # noqa: E402, F401
from tests.replay_recordings import recordings, starved_loader_run  # noqa: E402, F401

# The test process is no monitor: its collector is never settled (frozen objects and a
# higher threshold would outlive the test that showed an app); tests/tui/test_gc_settle.py
# checks it in a process of its own.
gc_settle._settled = True


@pytest.fixture
def python() -> str:
    return sys.executable


@pytest.fixture
def workloads() -> Path:
    return ROOT / "tests" / "workloads"


def compiled_steps_module():
    """``perftop.hook._steps_fast`` (steps.py compiled), whatever PERFTOP_PURE says; skipped
    when it is not built (a failure instead with PERFTOP_REQUIRE_SPEEDUPS=1, as on CI)."""
    try:
        from perftop.hook import _steps_fast
    except ImportError as exc:
        if os.environ.get("PERFTOP_REQUIRE_SPEEDUPS"):
            raise
        pytest.skip(f"perftop.hook._steps_fast not built: {exc}")
    return _steps_fast


@pytest.fixture(params=["python", "compiled"])
def tracker_cls(request) -> type:
    """The StepTracker of each build of steps.py: the plain module and the compiled one."""
    from perftop.hook.steps import StepTracker

    return StepTracker if request.param == "python" else compiled_steps_module().StepTracker


def _on_ci() -> bool:
    return os.environ.get("CI", "").lower() not in ("", "0", "false", "no")


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    """On CI (``CI=true``, as ``.ci/run`` sets) a skipped test is a failure: CI installs
    every tool and builds what the suite needs, so a skip there hides a gap."""
    skipped = terminalreporter.stats.get("skipped", [])
    if _on_ci() and skipped:
        terminalreporter.write_sep(
            "=", f"CI: {len(skipped)} skipped, which fails the run", red=True
        )
        reasons = Counter(
            rep.longrepr[2] if isinstance(rep.longrepr, tuple) else str(rep.longrepr)
            for rep in skipped
        )
        for reason, n in reasons.most_common():
            terminalreporter.write_line(f"{n} x {reason}")


def pytest_sessionfinish(session, exitstatus) -> None:
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    skipped = reporter.stats.get("skipped", []) if reporter is not None else []
    if _on_ci() and skipped and exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def _slow_first() -> dict[str, int]:
    """The test files listed in ``slow_first.txt``, by their place (longest first)."""
    path = ROOT / "tests" / "slow_first.txt"
    if not path.is_file():  # a suite of its own (tests/test_ci.py's): collection order
        return {}
    lines = path.read_text().splitlines()
    files = [ln.strip() for ln in lines if ln.strip() and not ln.startswith("#")]
    return {f: i for i, f in enumerate(files)}


def pytest_collection_modifyitems(session, config, items) -> None:
    """The longest files first, the rest as collected: the workers take whole files in this
    order (``--dist loadfile --no-loadscope-reorder``), so the run ends with short files
    filling the last gaps, not with one worker on a long file while the others idle."""
    rank = _slow_first()
    last = len(rank)
    order = {id(item): i for i, item in enumerate(items)}
    items.sort(key=lambda it: (rank.get(it.nodeid.split("::", 1)[0], last), order[id(it)]))
