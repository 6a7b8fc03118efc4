"""`report`, `replay`, `export` and `diff` run where there is no torch and no Linux: in a
subprocess whose imports of torch, psutil and Linux-only modules raise ImportError."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Modules a laptop without torch (macOS, Windows) lacks, and perftop's Linux-only parts.
BLOCKED = ("torch", "psutil", "pynvml", "fcntl", "resource", "perftop.monitor", "perftop.probes")

BLOCKER = """
import importlib.abc, sys
BLOCKED = {blocked!r}
class Blocker(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if any(name == b or name.startswith(b + ".") for b in BLOCKED):
            raise ImportError(f"blocked for this test: {{name}}")
        return None
sys.meta_path.insert(0, Blocker())
for b in BLOCKED:
    assert b not in sys.modules or b in ("fcntl", "resource"), b
"""


def run_blocked(code: str, cwd: Path, blocked: tuple[str, ...] = BLOCKED):
    src = BLOCKER.format(blocked=blocked) + textwrap.dedent(code)
    return subprocess.run(
        [sys.executable, "-c", src], cwd=cwd, capture_output=True, text=True, timeout=120,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip


def test_the_blocker_blocks(tmp_path: Path) -> None:
    r = run_blocked("import torch", tmp_path)
    assert r.returncode != 0 and "blocked for this test: torch" in r.stderr


def test_report_export_diff_without_torch_or_linux(tmp_path: Path, recordings) -> None:
    a, b = recordings["starved"], recordings["fixed"]
    r = run_blocked(
        f"""
        import sys
        from perftop.cli import main
        assert main(["report", "--json", {str(a)!r}]) == 0
        assert main(["report", "--from-step", "2", "--to-step", "5", {str(a)!r}]) == 0
        assert main(["export", {str(a)!r}, "--chrome-trace", "t.json", "--csv", "csv"]) == 0
        assert main(["diff", "--json", {str(a)!r}, {str(b)!r}]) == 0
        bad = [m for m in sys.modules if m.split(".")[0] in ("torch", "psutil", "fcntl")]
        print("LOADED", bad, file=sys.stderr)
        """,
        tmp_path,
    )
    assert r.returncode == 0, r.stderr
    assert "LOADED []" in r.stderr
    assert json.loads((tmp_path / "t.json").read_text())["traceEvents"]
    assert (tmp_path / "csv" / "steps.csv").exists()


def test_replay_app_without_torch_or_linux(tmp_path: Path, recordings) -> None:
    r = run_blocked(
        f"""
        import asyncio, sys
        from perftop.tui.replay import make_replay

        async def main():
            app, ctl = make_replay({str(recordings["starved"])!r}, playing=False)
            async with app.run_test(size=(120, 40)) as pilot:
                ctl.start()
                ctl.command("step", 10)
                for _ in range(400):
                    await pilot.pause(0.05)
                    if app.replay_state is not None and app.replay_state.step == 10:
                        break
                assert app.replay_state.step == 10, app.replay_state
                assert app.shown.steps.count == 10
                ctl.stop()

        asyncio.run(main())
        bad = [m for m in sys.modules if m.split(".")[0] in ("torch", "psutil")]
        print("LOADED", bad, file=sys.stderr)
        """,
        tmp_path,
        # Textual's terminal driver needs termios/fcntl on POSIX (it has a Windows driver)
        blocked=tuple(b for b in BLOCKED if b not in ("fcntl", "resource")),
    )
    assert r.returncode == 0, r.stderr
    assert "LOADED []" in r.stderr
