"""A TUI with nothing to do sleeps (issue 47: as light as htop): a paused replay in a real
terminal (tmux) wakes a few times in seconds, where Textual's input thread polled ten times
a second and the replay's player twenty; keys still come at once, a lone Escape among them
(the key parser's own timeout, which the input thread now waits for), and ``q`` ends it."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import psutil

from tests.tui.test_e2e_failure import RECORDING, Term, pytestmark  # noqa: F401 (tmux)


def _switches(proc: psutil.Process) -> int:
    """Voluntary context switches of all the process's threads: each is a wake-up."""
    total = 0
    for t in proc.threads():
        with open(f"/proc/{proc.pid}/task/{t.id}/status") as f:
            total += next(int(ln.split()[1]) for ln in f if ln.startswith("voluntary_ctxt"))
    return total


def test_a_paused_replay_sleeps_and_still_answers_keys(tmp_path: Path) -> None:
    term = Term(tmp_path, [sys.executable, "-m", "perftop", "replay", "--paused", str(RECORDING)])
    try:
        term.wait_for(r"─ Steps ─")
        pane = psutil.Process(term.pane_pid())
        app = next(p for p in pane.children(recursive=True) if "replay" in p.cmdline())
        time.sleep(2.0)  # the index read, the first screens drawn
        before = _switches(app)
        time.sleep(4.0)
        woke = _switches(app) - before
        # 4 s: the input thread's safety net (2 s) twice, a few of the runtime's own
        assert woke <= 12, woke  # (it was ~120: 10 + 20 a second)
        term.keys("?")
        term.wait_for("perftop help", timeout=10)
        term.keys("\x1b")  # a lone ESC: the Escape key once the parser's timeout passes
        term.wait_for(r"^(?![\s\S]*perftop help)", timeout=10)
        term.keys("q")
        assert term.exit_code(timeout=20) == 0
    finally:
        term.close()
