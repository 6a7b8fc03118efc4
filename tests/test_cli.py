"""The command line under bad input: one line, a non-zero exit code, never a traceback."""

from __future__ import annotations

import pytest

from tests.helpers import perftop_process as perftop


@pytest.mark.parametrize(
    ("args", "code", "says"),
    [
        (["run", "--headless", "--no-record", "no-such-program"], 127, "command not found"),
        (["run", "--headless", "--no-record", "{tmp}/script.py"], 127, "perftop run python"),
        (["run", "--headless"], 2, "no command given"),
        (["run", "--headless", "--interval", "0.05", "true"], 2, "--interval"),
        (["run", "--headless", "--refresh", "0", "true"], 2, "--refresh"),
        (
            ["run", "--headless", "--record", "{tmp}/no/such/dir/r.perftop", "true"],
            3,
            "cannot write",
        ),
        (["report", "{tmp}"], 3, "cannot open"),
        (["run", "--headless", "--record", "{tmp}", "true"], 3, "is a directory; name a file"),
        (["run", "--headless", "--no-record", "--", "{tmp}"], 127, "is a directory, not a command"),
        (["run", "--headless", "--interval", "inf", "true"], 2, "finite number of seconds"),
        (["run", "--headless", "--refresh", "nan", "true"], 2, "finite number of seconds"),
        (["attach", "1", "--duration", "inf"], 2, "finite number of seconds"),
        (["collect", "--duration", "nan"], 2, "finite number of seconds"),
        # (an address not on this host: it said the token it made for nodes first, then this)
        (["collect", "--no-record", "--listen", "192.0.2.1:9"], 2, "cannot listen on 192.0.2.1"),
    ],
)
def test_bad_input_is_one_clear_line(tmp_path, args, code, says):
    (tmp_path / "script.py").write_text("print('hi')\n")  # exists, not executable
    r = perftop(*[a.format(tmp=tmp_path) for a in args], cwd=tmp_path)
    assert r.returncode == code, r.stderr
    assert says in r.stderr and "Traceback" not in r.stderr
    assert r.stderr.strip().count("\n") == 0
    assert "--force" not in r.stderr  # never advised where it cannot help


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--from-step", "0"], "--from-step 0: steps count from 1"),
        (["--to-step", "0"], "--to-step 0: steps count from 1"),
        (["--from-time", "100000"], "--from-time 100000 is past the end of the recording"),
        (["--from-time", "nan"], "finite number of seconds"),
        (["--to-time", "inf"], "finite number of seconds"),
    ],
)
def test_a_bad_slice_is_one_clear_line(recordings, args, says):
    rec = recordings["sync"]
    r = perftop("report", str(rec), *args, cwd=rec.parent)
    assert r.returncode == 2 and says in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert r.stderr.strip().count("\n") == 0 and r.stdout == ""


def test_a_command_that_cannot_start_leaves_no_recording(tmp_path):
    """No empty recording is left behind to refuse the next run ("already exists")."""
    rec = tmp_path / "r.perftop"
    r = perftop("run", "--headless", "--record", str(rec), "no-such-program", cwd=tmp_path)
    assert r.returncode == 127 and "command not found" in r.stderr
    assert not rec.exists()


def test_existing_recording_is_not_overwritten(tmp_path):
    rec = tmp_path / "r.perftop"
    assert perftop("run", "--headless", "--record", str(rec), "true", cwd=tmp_path).returncode == 0
    size = rec.stat().st_size
    r = perftop("run", "--headless", "--record", str(rec), "true", cwd=tmp_path)
    assert r.returncode == 3 and "already exists" in r.stderr and rec.stat().st_size == size
    r = perftop("run", "--headless", "--force", "--record", str(rec), "true", cwd=tmp_path)
    assert r.returncode == 0


def test_help_and_version(tmp_path):
    assert perftop("--version", cwd=tmp_path).stdout.startswith("perftop ")
    r = perftop(cwd=tmp_path)
    assert r.returncode == 2 and "run" in r.stderr and "report" in r.stderr
