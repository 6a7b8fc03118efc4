"""Keys under a job that prints 50,000 lines/s, in a real terminal (tmux), recording on:
the Output panel rendered every line the model kept (2,000 per refresh) and keys waited
seconds (some more than ten); now it renders the newest and counts the rest. The bound
here is generous (a loaded 2-core machine); ``benchmarks/tui_keys_chatty.py`` measures."""

from __future__ import annotations

import contextlib
import re
import shutil
import sys
import time
from pathlib import Path

import psutil
import pytest

from tests.tui.test_e2e_failure import Term, tmux

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux not installed")
CHATTY = """
import sys, time
t0 = time.monotonic(); n = 0
while time.monotonic() - t0 < 90:
    while n < (time.monotonic() - t0) * 50_000:
        print(f"line {n} of a chatty job, loss 0.{n % 9999:04d}")
        n += 1
    sys.stdout.flush()
    time.sleep(0.005)
"""
BOUND_S = 5.0  # every key; the old code left some unanswered for more than 10 s


def test_keys_are_answered_under_a_flood_of_output(tmp_path: Path) -> None:
    job = tmp_path / "chatty.py"
    job.write_text(CHATTY)
    rec = tmp_path / "chatty.perftop"
    term = Term(tmp_path, [sys.executable, "-m", "perftop", "run", "--record", str(rec),
                           sys.executable, str(job)])  # fmt: skip
    try:
        term.wait_for(r"line \d+ of a chatty job")
        time.sleep(2.0)  # the flood in full
        waits = []
        for _ in range(8):
            for key, shown in (("?", True), ("x", False)):
                t0 = time.monotonic()
                term.keys(key)
                while ("perftop help" in term.screen()) != shown:
                    assert time.monotonic() - t0 < BOUND_S, f"{key!r} unanswered: {waits}"
                    time.sleep(0.01)
                waits.append(round(time.monotonic() - t0, 2))
                time.sleep(0.2)
        counted = re.search(r"([\d,]+) lines \(([\d,]+) not shown\)", term.screen())
        assert counted is not None, term.screen()  # the flood is counted, not rendered
    finally:
        pane = int(
            tmux("display", "-p", "-t", f"={term.name}:", "#{pane_pid}", sock=term.name).strip()
            or 0
        )
        with contextlib.suppress(psutil.Error):
            procs = psutil.Process(pane).children(recursive=True)
            for p in procs:
                with contextlib.suppress(psutil.Error):
                    p.kill()
        term.close()
