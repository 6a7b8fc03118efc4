"""Output with no newline, as under a flood of ``sys.stdout.write`` of big chunks, is kept
for the screen a line of ``LINE_CHARS`` at most (issue 43, tried in tmux): its 64 KiB
pieces held whole grew the monitor by half a gigabyte (the model's 2,000 lines and the
Output panel's 5,000). A real job with its output captured as under the TUI."""

from __future__ import annotations

import sys

from perftop.events import Output
from perftop.model.terminal import LINE_CHARS
from perftop.monitor.jobenv import RunConfig
from perftop.monitor.runner import Job
from perftop.recording import read_events

WRITES = (
    "import sys\n"
    "sys.stdout.write('z' * (300 << 10))\n"  # 300 KiB, no newline: pieces of 64 KiB
    "sys.stdout.write('\\nshort line\\n')\n"
)


def test_a_long_line_is_kept_cut_for_the_screen_and_whole_in_the_recording(tmp_path) -> None:
    rec = tmp_path / "r.perftop"
    cmd = (sys.executable, "-c", WRITES)
    job = Job(RunConfig(command=cmd, record=rec, capture_output=True)).start()
    assert job.wait() == 0
    snap = job.hub.latest
    assert snap is not None
    lines = [line.text for line in snap.output]
    long = [t for t in lines if t.startswith("z")]
    assert len(long) >= 5  # 300 KiB in pieces of at most 64 KiB
    for t in long:
        kept, _, said = t.partition(" … [perftop: ")
        assert kept == "z" * LINE_CHARS
        assert said.endswith(" more characters]")
    told = sum(int(t.rpartition("[perftop: ")[2].split()[0].replace(",", "")) for t in long)
    assert told + LINE_CHARS * len(long) == 300 << 10  # every character kept or counted
    assert "short line" in lines
    # The recording keeps what perftop took in whole.
    recorded = "".join(e.text for e in read_events(rec) if isinstance(e, Output))
    assert recorded.count("z") == 300 << 10
