"""The job's process under perftop (issue 28): recording names two runs cannot share."""

from __future__ import annotations

import json
import re
import signal
import time

from perftop.recording import default_path
from tests.helpers import perftop, spawn_slow_job, until_step


def test_default_names_are_unique_and_created_exclusively(tmp_path):
    """Runs started in the same second (here: names of this half-minute already taken)
    each get a name of their own, in the readable form, instead of refusing to start."""
    now = time.time()
    taken = {str(default_path(now + d)) for d in range(-1, 30)}
    for name in taken:
        (tmp_path / name).write_bytes(b"someone else's")
    r = perftop("run", "--headless", "python", "-c", "pass", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    new = [p for p in tmp_path.glob("perftop-*.perftop") if p.name not in taken]
    assert len(new) == 1, sorted(p.name for p in tmp_path.iterdir())
    assert re.fullmatch(r"perftop-\d{8}-\d{6}-2\.perftop", new[0].name)
    assert str(new[0].name) in r.stderr  # the summary names the file it wrote
    assert all((tmp_path / n).read_bytes() == b"someone else's" for n in taken)
    assert perftop("report", "--json", str(new[0]), cwd=tmp_path).returncode == 0


def test_force_never_shares_a_live_recording(tmp_path):
    """--force on the file a live session records to is a clear one-line error: that
    session's recording stays whole. Once it has ended, --force overwrites as asked."""
    rec = tmp_path / "r.perftop"
    mon = spawn_slow_job(tmp_path, "--record", str(rec))
    try:
        until_step(mon, 50)
        r = perftop("run", "--headless", "--force", "--record", str(rec), "true", cwd=tmp_path)
        assert r.returncode == 3, r.stderr
        assert "a live perftop session is recording to it" in r.stderr
        assert r.stderr.strip().count("\n") == 0 and "Traceback" not in r.stderr
        until_step(mon, 100)
    finally:
        mon.send_signal(signal.SIGTERM)
        mon.communicate(timeout=60)
    rep = json.loads(perftop("report", "--json", str(rec), cwd=tmp_path).stdout)
    assert rep["steps"]["count"] >= 100
    r = perftop("run", "--headless", "--force", "--record", str(rec), "true", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
