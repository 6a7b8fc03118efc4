"""The job's output in the order it wrote it, across stdout and stderr, and a progress bar
never one line with another writer's text (issue 45, item 10). A real job with its output
captured as under the TUI (and its recording, replayed), and one under
``perftop run --stream-out``, whose relay must pass the job's bytes on unchanged.

Read at each poll, one stream's new lines all came before the other's: timm's end-of-run
stdout block showed above the stderr lines it wrote before it, in the TUI and in replay.
A tqdm bar's unfinished line took the next log line written after it ("…40.0it/s]Training
Reported step 0"), and a bar running long was a line for each 4 KiB of its updates. Each phase below writes two streams back to back, microseconds apart
(one poll always read both), then pauses for the reader, which reads at each write: what
one stream, then the other, then the first again wrote within one read has no order: a
reader that lags behind a pause (CI's loaded VM, over 0.1 s) reads the next phase's writes
with the last one's late ones, and their order is lost (outorder.py)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from perftop.events import Output
from perftop.monitor.jobenv import RunConfig
from perftop.monitor.runner import Job
from perftop.recording import read_events

JOB = r"""
import sys, time
def say(stream, text):
    stream.write(text)
    stream.flush()
for i in range(2):  # (0.3 s: a reader on a loaded 2-core VM lagged over 0.1 s)
    say(sys.stderr, f"err {i}a\nerr {i}b\n")
    say(sys.stdout, f"out {i}a\nout {i}b\n")
    time.sleep(0.3)
    say(sys.stdout, f"OUT {i}\n")
    say(sys.stderr, f"ERR {i}\n")
    time.sleep(0.3)
for i in range(3):
    say(sys.stderr, f"\r{i * 10:3d}%|{'#' * i:10s}| {i}/10 [00:01<00:02, 40.0it/s]")
    time.sleep(0.05)
    say(sys.stderr, f"TrainingReported step {i}\n")
    time.sleep(0.05)
say(sys.stderr, "\r100%|##########| 10/10\n")
for i in range(1, 5):  # Keras's old bar: backspaces, a carriage return, the bar: 3 writes
    for part in ("\b" * 12 if i > 1 else "", "\r", f"[{'=' * i:4s}] {i}/4 "):
        say(sys.stdout, part)
        time.sleep(0.025)  # each read alone: the bar goes on, it is no other writer's text
say(sys.stdout, "\n")
for i in range(1, 301):  # 12 KiB of updates on one line: more than MAX_LINE
    say(sys.stderr, f"\rfast bar {i:3d}/300 " + "#" * (i // 10))
say(sys.stderr, "\n")
time.sleep(0.1)
# 300 updates in one write (a reader late by that much): 12 KiB read at once, one line
say(sys.stderr, "".join(f"\rburst bar {i:3d}/300 " + "#" * (i // 10) for i in range(301)))
time.sleep(0.1)
say(sys.stderr, "\n")
time.sleep(0.1)
say(sys.stdout, "L" * 6000)  # a line longer than MAX_LINE, ended later
time.sleep(0.05)
say(sys.stdout, "L\n")
say(sys.stdout, "end block 1\nend block 2\n\n")
"""

WANT = [
    *[
        (s, t)
        for i in range(2)
        for s, t in [
            ("stderr", f"err {i}a"),
            ("stderr", f"err {i}b"),
            ("stdout", f"out {i}a"),
            ("stdout", f"out {i}b"),
            ("stdout", f"OUT {i}"),
            ("stderr", f"ERR {i}"),
        ]
    ],
    *[
        (s, t)
        for i in range(3)
        for s, t in [
            ("stderr", f"{i * 10:3d}%|{'#' * i:10s}| {i}/10 [00:01<00:02, 40.0it/s]"),
            ("stderr", f"TrainingReported step {i}"),
        ]
    ],
    ("stderr", "100%|##########| 10/10"),
    ("stdout", "[====] 4/4 "),  # one line, its last state
    ("stderr", "fast bar 300/300 " + "#" * 30),  # one line, its last state
    ("stderr", "burst bar 300/300 " + "#" * 30),  # one line, however many states a read had
    ("stdout", "end block 1"),
    ("stdout", "end block 2"),
    ("stdout", ""),  # an empty last line is a line
]


def _shown(output) -> list[tuple[str, str]]:
    """The lines shown, but the long line's pieces (cut where the reads fell)."""
    return [(line.stream, line.text) for line in output if not line.text.startswith("L")]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Job, Path]:
    d = tmp_path_factory.mktemp("order")
    script = d / "job.py"
    script.write_text(JOB)
    rec = d / "r.perftop"
    job = Job(RunConfig(command=(sys.executable, str(script)), record=rec, capture_output=True))
    assert job.start().wait() == 0
    return job, rec


def test_the_panel_shows_lines_in_the_order_written_across_streams(run) -> None:
    job, _ = run
    snap = job.hub.latest
    assert snap is not None
    assert _shown(snap.output) == WANT


def test_replay_shows_the_same_lines_in_the_same_order(run) -> None:
    from perftop.replay.index import ReplayIndex
    from perftop.replay.player import Player

    _, rec = run
    ix = ReplayIndex(rec)
    ix.build()
    p = Player(ix)
    p.seek_event(ix.events)
    assert _shown(p.snapshot().output) == WANT
    # No event recorded holds a bar's state with the line written after it.
    texts = [e.text for e in read_events(rec) if isinstance(e, Output)]
    assert not [t for t in texts if "it/s]" in t and "Training" in t]


def test_the_relay_passes_the_jobs_bytes_on_unchanged_in_order(tmp_path) -> None:
    """``--stream-out`` (what `perftop collect --ssh` runs): the job's output relayed to
    our stderr, byte for byte, in the order written, before perftop's own summary: a
    line longer than ``MAX_LINE`` passed on in pieces once had a newline after each."""
    script = tmp_path / "job.py"
    script.write_text(JOB)
    plain = subprocess.run(
        [sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    cmd = [sys.executable, "-m", "perftop", "run", "--stream-out", "--no-record", "--"]
    got = subprocess.run(
        [*cmd, sys.executable, str(script)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        timeout=60,
        cwd=tmp_path,
    )
    assert got.returncode == 0
    assert plain.stdout and got.stderr.startswith(plain.stdout)


def test_headless_the_job_writes_its_own_streams_byte_for_byte(tmp_path) -> None:
    """``--headless``: the job's stdout and stderr are perftop's own, untouched (perftop's
    summary follows on stderr)."""
    script = tmp_path / "job.py"
    script.write_text(JOB)
    run = [sys.executable, str(script)]
    plain = subprocess.run(run, capture_output=True)
    got = subprocess.run(
        [sys.executable, "-m", "perftop", "run", "--headless", "--no-record", "--", *run],
        capture_output=True,
        timeout=60,
    )
    assert got.returncode == 0
    assert got.stdout == plain.stdout
    assert plain.stderr and got.stderr.startswith(plain.stderr)


def test_writes_that_come_while_a_read_begins_keep_their_order(tmp_path) -> None:
    """A wait that timed out (the tail's events were due) just before the job wrote stderr,
    then stdout: the writes' events came once the read's sizes were taken, and the streams
    were read in a fixed order, stdout first (CI, under load: "out 1a" above "err 1a").
    A stream written again after the sizes were taken is read first in the next read, as
    far as it was then (its later writes in their order: CI, a loaded VM, read "ERR 1"
    above the "OUT 1" written before it); one whose late write was all in this read is
    not."""
    from perftop.monitor.outorder import WriteOrder

    paths = {n: str(tmp_path / f"{n}.log") for n in ("stdout", "stderr")}
    files = {n: open(p, "ab", buffering=0) for n, p in paths.items()}  # noqa: SIM115

    def sizes() -> dict[str, int]:
        return {n: Path(p).stat().st_size for n, p in paths.items()}

    order = WriteOrder(paths)
    try:
        if order.fd < 0:
            pytest.skip("no inotify here")
        assert order.wait(0) == []  # timed out: nothing written yet
        files["stderr"].write(b"err\n")
        files["stdout"].write(b"out\n")
        ends = sizes()
        assert order.settle([], ends, sizes) == ["stderr", "stdout"]
        assert order.wait(0) == []  # their events were this read's
        files["stdout"].write(b"out 2\n")
        ends = sizes()
        files["stderr"].write(b"err 2\n")  # after the sizes: the next read's
        assert order.settle([], ends, sizes) == ["stdout", "stderr"]
        late = sizes()["stderr"]
        files["stdout"].write(b"OUT 3\n")  # the reader late (a loaded host): both streams
        files["stderr"].write(b"ERR 3\n")  # written again before it reads
        assert order.heads() == {"stderr": late}  # "err 2" first, as far as it went
        assert order.wait(0) == ["stdout", "stderr"]  # then "OUT 3", then "ERR 3"
        assert order.heads() == {}
    finally:
        order.close()
        for f in files.values():
            f.close()


class LateTail:
    """A real output tail whose next read has the job write ``late`` to stderr just after
    the read took the files' sizes (a loaded host's reader, deterministic here)."""

    def __init__(self, tmp_path, late: bytes) -> None:
        from perftop.monitor.output import OutputTail

        self.got: list = []
        self.tail = OutputTail(lambda *evs: self.got.extend(evs), directory=str(tmp_path))
        if self.tail._order.fd < 0:
            self.tail.stop()
            pytest.skip("no inotify here")
        real = self.tail._order.settle

        def settle(order, ends, sizes):  # the read's sizes are taken: the job writes on
            self.say("stderr", late)
            self.tail._order.settle = real
            return real(order, ends, sizes)

        self.tail._order.settle = settle

    def say(self, name: str, text: bytes) -> None:
        f = self.tail.stdout if name == "stdout" else self.tail.stderr
        f.write(text)
        f.flush()

    def poll(self, final: bool = False) -> None:
        self.tail.poll(final=final, order=self.tail._order.wait(0))

    def outputs(self) -> list:
        from perftop.events import Output

        return [e for e in self.got if isinstance(e, Output)]


@pytest.fixture
def late_tail(tmp_path):
    made: list[LateTail] = []

    def make(late: bytes) -> LateTail:
        made.append(LateTail(tmp_path, late))
        return made[-1]

    yield make
    for t in made:
        t.tail.stop()


def test_a_late_write_comes_before_what_both_streams_wrote_after_it(late_tail) -> None:
    """The output tail itself: a read whose sizes were taken just before the job wrote
    stderr ("err 2"), then a reader late enough (a loaded host) that the job has written
    stdout ("OUT 3"), then stderr ("ERR 3") again before the next read: lines in the order
    written. The late stream was read first, whole, in the next read: "ERR 3" above "OUT 3"
    (CI, a loaded VM)."""
    t = late_tail(b"err 2\n")
    t.say("stdout", b"out 1\n")
    t.poll()
    t.say("stdout", b"OUT 3\n")
    t.say("stderr", b"ERR 3\n")
    t.poll(final=True)
    lines = [(e.stream, ln) for e in t.outputs() for ln in e.text.splitlines()]
    assert lines == [
        ("stdout", "out 1"), ("stderr", "err 2"), ("stdout", "OUT 3"), ("stderr", "ERR 3")
    ]  # fmt: skip


def test_a_late_flood_over_the_rate_keeps_its_newest_lines(late_tail) -> None:
    """A late write read in two pieces (as far as it went, then the rest) asks the rate
    once: over it, the oldest bytes of both pieces are left out and the newest kept. Asked
    per piece, the first spent the allowance on the flood's oldest bytes and its last line
    ("done") was left out (CI: the 20 MB line's test)."""
    from perftop.monitor import outrate

    t = late_tail(b"".join(b"flood %04d\n" % i for i in range(500)))
    t.tail._buckets["stderr"] = outrate.Bucket(0.0, rate=0.0, burst=1000)
    t.say("stdout", b"out 1\n")
    t.poll()
    t.say("stderr", b"done\n")
    t.poll(final=True)
    lines = [ln for e in t.outputs() for ln in e.text.splitlines()]
    assert lines[0] == "out 1" and lines[-2] == "done", lines[-3:]
    assert lines[-1].startswith("[perftop: ") and "flood 0000" not in lines
    assert t.tail.left_out == 500 * 11 + 5 - 1000


def test_a_prompt_read_in_two_pieces_is_one_line(late_tail) -> None:
    """A late write that leaves a line unfinished (a prompt written in two writes, the
    first after a read took its sizes), then the TUI asks for the unfinished line: it is
    one line, not the first piece and the rest each as a line of its own."""
    t = late_tail(b"overwrite? [y")
    t.say("stdout", b"out 1\n")
    t.poll()
    t.say("stderr", b"/N] ")
    t.tail.show_partial()
    t.poll()
    t.poll(final=True)
    texts = [(e.stream, e.text) for e in t.outputs()]
    assert texts == [("stdout", "out 1\n"), ("stderr", "overwrite? [y/N] ")], texts


RANKS = r"""
import subprocess, sys, time
if len(sys.argv) > 1:  # a rank: both start printing at the same moment
    rank, go = sys.argv[1], float(sys.argv[2])
    while time.time() < go:
        pass
    for i in range(3000):
        print(f"rank {rank} line {i:04d}", "x" * 40)
    sys.exit(0)
go = time.time() + 1.0
ranks = [subprocess.Popen([sys.executable, __file__, str(r), str(go)]) for r in range(2)]
sys.exit(max(p.wait() for p in ranks))
"""


def test_two_processes_printing_at_once_keep_their_lines_whole(tmp_path, monkeypatch) -> None:
    """Two processes of the job (two ranks) printing at once, each line one ``print``: a
    terminal shows whole lines (line-buffered, a line a write). Under perftop's capture the
    job had ``PYTHONUNBUFFERED`` alone, so a ``print`` was three writes (its two parts, the
    newline), and the ranks' lines tore into each other's: 36,264 of 40,000 in the
    recording of such a run. The bootstrap makes the job's streams line-buffered."""
    script = tmp_path / "ranks.py"
    script.write_text(RANKS)
    rec = tmp_path / "r.perftop"
    monkeypatch.delenv("PYTHONUNBUFFERED", raising=False)  # as a user's shell has it
    job = Job(RunConfig(command=(sys.executable, str(script)), record=rec, capture_output=True))
    assert job.start().wait() == 0
    text = "".join(e.text for e in read_events(rec) if isinstance(e, Output))
    lines = text.split("\n")
    assert lines.pop() == ""
    whole = re.compile(r"rank [01] line \d{4} x{40}")
    torn = [ln for ln in lines if not whole.fullmatch(ln)]
    assert len(lines) == 6000 and not torn, (len(lines), torn[:5])
