"""A job's coloured log lines read in colour in the Output panel, as ``less -R`` shows
them, and nothing but colours is taken from them: a real job writes skorch's coloured epoch
table and hostile escapes on one line; the panel shows the text in its colours, the other
escapes as ``^[``, and no byte of the job's reaches the terminal."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from rich.color import Color

from perftop.monitor.jobenv import RunConfig
from perftop.monitor.runner import Job
from perftop.report.build import session_from_file
from perftop.tui.app import PerftopApp
from perftop.tui.messages import SnapshotMessage
from perftop.tui.sgr import PLAIN, Pen, pen_after
from perftop.tui.widgets.output import OutputPanel
from tests.test_escapes import raw, terminal_bytes

JOB = r"""
import sys
# skorch's PrintLog: cyan, green and magenta figures, each ended by a reset
print("      1        \x1b[36m0.1711\x1b[0m       \x1b[32m0.9593\x1b[0m        \x1b[35m0.1140\x1b[0m  2.1", flush=True)
print("warn \x1b[1;33mbold yellow\x1b[22;39m back \x1b]0;PWNED\x07 \x1b[2J\x1b[8mshown\x1b[0m", file=sys.stderr, flush=True)
print("deep \x1b[38;5;208morange\x1b[0m true \x1b[38;2;10;200;30mrgb\x1b[m cut \x1b[38;5mx", flush=True)
"""


def test_sgr_states() -> None:
    cyan = pen_after(PLAIN, "36")
    assert cyan.fg == Color.from_ansi(6) and pen_after(cyan, "0") == PLAIN
    assert pen_after(cyan, "") == PLAIN  # ESC[m is a reset
    assert pen_after(PLAIN, "1;93").bold and pen_after(PLAIN, "93").fg == Color.from_ansi(11)
    assert pen_after(PLAIN, "48;5;17").bg == Color.from_ansi(17)
    assert pen_after(PLAIN, "38;2;1;2;3").fg == Color.from_rgb(1, 2, 3)
    assert pen_after(PLAIN, "38:2::1:2:3").fg == Color.from_rgb(1, 2, 3)
    assert pen_after(pen_after(PLAIN, "1;2;31"), "22;39") == PLAIN
    # cut short or out of range: no colour; hiding and blinking are not taken
    assert pen_after(PLAIN, "38;5") == PLAIN and pen_after(PLAIN, "38;5;300") == PLAIN
    assert pen_after(PLAIN, "38;2;1;2") == PLAIN and pen_after(PLAIN, "5;6;8") == PLAIN
    assert pen_after(PLAIN, "4;7;9") == Pen(underline=True, reverse=True, strike=True)


def test_a_jobs_colours_reach_the_panel_and_its_escapes_do_not(tmp_path: Path) -> None:
    (tmp_path / "job.py").write_text(JOB)
    cfg = RunConfig((sys.executable, str(tmp_path / "job.py")), tmp_path / "r.perftop",
                    capture_output=True)  # fmt: skip
    assert Job(cfg).start().wait() == 0
    snap = session_from_file(str(tmp_path / "r.perftop")).snapshot(window=None)
    assert any("\x1b[36m" in line.text for line in snap.output)  # the model keeps them

    async def show() -> None:
        app = PerftopApp()
        async with app.run_test(size=(160, 48)) as pilot:
            app.post_message(SnapshotMessage(snap))
            for _ in range(3):
                await pilot.pause()
            screen = terminal_bytes(app)
            assert raw(screen) == []  # only perftop's own colours and moves
            assert "^[[36m" not in screen and "0.1711" in screen
            lines = app.query_one(OutputPanel).log_view.lines
            text = "\n".join("".join(seg.text for seg in strip) for strip in lines)
            assert "^[]0;PWNED^G ^[[2Jshown" in text  # the rest visible; hidden text shown
            segs = {}
            for strip in lines:
                for seg in strip:
                    segs.setdefault(seg.text.strip(), seg.style)
            colour = {k: v.color if v else None for k, v in segs.items()}
            assert colour["0.1711"] != colour["0.9593"] != colour["0.1140"] != colour["1"]
            back = "back ^[]0;PWNED^G ^[[2J"
            assert segs["bold yellow"].bold and colour["bold yellow"] != colour[back]
            assert colour["warn"] == colour[back] == colour["shown"]  # stderr's red again
            assert not (segs[back] and segs[back].bold)
            assert colour["orange"] != colour["deep"] and colour["rgb"] != colour["true"]
            # a reset, then a broken SGR: swallowed, as a terminal does, and no colour
            assert colour["cut x"] == colour["deep"]

    asyncio.run(show())
