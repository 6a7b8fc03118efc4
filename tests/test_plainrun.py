"""The suite's forked plain runs (tests/plainrun.py) are what ``python …`` gives: the
same exit status, output, argv, ``__main__``, warnings, atexit handlers, threads joined,
traceback. Each case runs both ways and compares."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.plainrun import PlainRun, run_plain, start_plain

CASES = {
    "exit-status-and-argv": "import sys; print(sys.argv, __name__, sys.path[0]); sys.exit(3)",
    "traceback": "def f():\n    1 / 0\nf()",
    "atexit-and-threads": (
        "import atexit, threading, time\n"
        "atexit.register(print, 'atexit ran')\n"
        "threading.Thread(target=lambda: (time.sleep(0.2), print('joined'))).start()"
    ),
    # a warning once per place (the default action), and the PYTHONWARNINGS filter
    "warnings": (
        "import warnings\n"
        "for _ in range(3):\n"
        "    warnings.warn('shown once')\n"
        "warnings.warn('hidden', DeprecationWarning)\n"
        "warnings.warn('a resource', ResourceWarning)"
    ),
    "exit-message": "raise SystemExit('bad input')",
    "buffered-output": "import sys; print('out'); print('err', file=sys.stderr); print('out 2')",
}


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("warnings", ["ignore::ResourceWarning", "default"])
def test_a_forked_run_reads_as_a_fresh_one(name: str, warnings: str, tmp_path: Path) -> None:
    script = tmp_path / "job.py"
    script.write_text(CASES[name] + "\n")
    env = {**os.environ, "PYTHONWARNINGS": warnings}
    for cmd in ([sys.executable, str(script), "a", "b"], [sys.executable, "-c", CASES[name], "x"]):
        p = start_plain(cmd, cwd=tmp_path, env=env)
        assert isinstance(p, PlainRun)  # forked, not a subprocess
        out, err = p.communicate(timeout=60)
        fresh = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True)
        assert (p.returncode, out, err) == (fresh.returncode, fresh.stdout, fresh.stderr)


def test_flags_run_as_a_subprocess_and_another_environment_in_its_own_zygote(
    tmp_path: Path,
) -> None:
    """Interpreter flags: a subprocess. An environment read at start-up that differs (a hash
    seed; a test's monkeypatch): forked from a zygote started in it, the result the same."""
    flags = start_plain(
        [sys.executable, "-X", "dev", "-c", "import sys; print(sys.flags.dev_mode)"]
    )
    assert isinstance(flags, subprocess.Popen) and flags.communicate(timeout=60)[0] == "True\n"
    for seed in ("7", "8"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        seeded = start_plain([sys.executable, "-c", "print(hash('a'))"], env=env)
        assert isinstance(seeded, PlainRun)
        want = subprocess.run(
            [sys.executable, "-c", "print(hash('a'))"], env=env, capture_output=True
        )
        assert seeded.communicate(timeout=60)[0] == want.stdout.decode()


def test_a_run_past_its_timeout_is_killed_with_its_group(tmp_path: Path) -> None:
    code = "import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); time.sleep(60)"
    with pytest.raises(subprocess.TimeoutExpired):
        run_plain([sys.executable, "-c", code], timeout=1)
    done = run_plain([sys.executable, "-c", "print('next')"])  # the zygote serves on
    assert done.stdout == "next\n"
