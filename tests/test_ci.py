"""CI runs everything: a skipped test fails a CI run (and says why); locally it does not."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SUITE = """
import pytest

def test_runs():
    pass

def test_needs_a_tool():
    pytest.skip("frobnicator not installed")
"""


def _pytest(tmp_path: Path, ci: str) -> subprocess.CompletedProcess[str]:
    shutil.copy(HERE / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "test_x.py").write_text(SUITE)
    env = {**os.environ, "CI": ci}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-ra", "-p", "no:cacheprovider", "test_x.py"],
        cwd=tmp_path, capture_output=True, text=True, timeout=60, env=env,
    )  # fmt: skip


def test_a_skip_fails_ci_with_its_reason(tmp_path):
    r = _pytest(tmp_path, "true")
    assert r.returncode == 1, r.stdout
    assert "CI: 1 skipped, which fails the run" in r.stdout
    assert "1 x Skipped: frobnicator not installed" in r.stdout


def test_a_skip_outside_ci_is_listed_but_passes(tmp_path):
    r = _pytest(tmp_path, "")
    assert r.returncode == 0, r.stdout
    assert "SKIPPED [1] test_x.py:8: frobnicator not installed" in r.stdout


def test_ci_installs_tmux_rather_than_skipping_the_terminal_test():
    run = (HERE.parent / ".ci" / "run").read_text()
    assert "apt-get install -y -qq tmux" in run and 'export CI="${CI:-true}"' in run
