"""The Output panel's lines are what a terminal shows: a progress bar rewritten in place
with carriage returns is its last state, not a line per update (real tqdm output, cut
into events as the monitor's output tail cuts it)."""

from __future__ import annotations

import io

from tqdm import tqdm

from perftop.events import Output
from perftop.model import Session
from perftop.model.terminal import terminal_lines
from perftop.monitor.output import MAX_LINE


def tail_cuts(data: str) -> list[str]:
    """The events' texts as ``OutputTail.poll`` makes them from what it reads: up to the
    last newline, or a partial line once it is longer than ``MAX_LINE``."""
    out, partial = [], ""
    for k in range(0, len(data), 1000):  # a poll every 1000 characters written
        buf = partial + data[k : k + 1000]
        head, sep, tail = buf.rpartition("\n")
        if len(tail) > MAX_LINE:
            head, tail = buf, ""
        elif sep:
            head += sep
        partial = tail
        if head:
            out.append(head)
    return out + ([partial] if partial else [])


def test_a_tqdm_bar_is_its_last_state_beside_the_jobs_log_lines():
    f = io.StringIO()
    for epoch in range(3):
        for _ in tqdm(range(3000), desc=f"epoch {epoch}", file=f, mininterval=0, miniters=1):
            pass
        f.write(f"epoch {epoch} loss 0.{epoch}\n")
    data = f.getvalue()
    assert data.count("\r") > 3000  # a real bar: an update per iteration
    s = Session()
    for text in tail_cuts(data):
        s.apply(Output(1.0, "stderr", text))
    lines = [ln.text for ln in s.snapshot().output]
    logs = [ln for ln in lines if ln.startswith("epoch ") and "loss" in ln]
    assert logs == ["epoch 0 loss 0.0", "epoch 1 loss 0.1", "epoch 2 loss 0.2"]
    bars = [ln for ln in lines if "%|" in ln]
    # one per closed bar, and one per partial cut of an open one (4 KiB of updates)
    assert len(bars) <= 3 + len(data) // MAX_LINE, len(bars)
    # each bar ends on its final state, right before its epoch's log line. A cut (a partial
    # line, every MAX_LINE characters of updates) that fell inside that state's text shows
    # it in two lines, the rest on the next; one between its last update and tqdm's closing
    # refresh (both 3000/3000) shows it once more, as the partial line before.
    for epoch in range(3):
        log = lines.index(f"epoch {epoch} loss 0.{epoch}")
        final = lines[log - 1]
        if not final.startswith(f"epoch {epoch}:"):
            final = lines[log - 2] + final  # the state's head, then its rest
        assert final.startswith(f"epoch {epoch}: 100%") and "3000/3000" in final, lines[
            log - 3 : log
        ]
    assert all("\r" not in ln for ln in lines)


def test_terminal_lines():
    assert terminal_lines("") == [""]
    assert terminal_lines("a\nb\n") == ["a", "b"]
    assert terminal_lines("x\r\ny\r\n") == ["x", "y"]  # CRLF ends a line
    assert terminal_lines("\r 1%\r 2%\r 3%") == [" 3%"]
    assert terminal_lines("loss 1\n\r 5%\r 6%\r") == ["loss 1", " 6%"]
    assert terminal_lines("a\x0bb") == ["a", "b"]  # the other separators, as before


def test_a_nested_bar_is_rewritten_in_place_and_its_moves_are_not_shown():
    """A nested tqdm bar (``position=1``: the HF Trainer's evaluation bar under its
    training bar) returns to its line with a cursor move up and a newline: each of its
    states read as a line ending in ``^[[A``. Real tqdm output, cut as the tail cuts it:
    one line per outer state, no move left; a job's other escapes still there, to be
    shown visibly."""
    f = io.StringIO()
    for epoch in tqdm(range(3), desc="train", file=f, mininterval=0, miniters=1):
        for _ in tqdm(range(40), desc="eval", leave=False, position=1, file=f, mininterval=0,
                      miniters=1):  # fmt: skip
            pass
        tqdm.write(f"epoch {epoch} done", file=f)  # a log line beside the bars
    data = f.getvalue()
    assert data.count("\x1b[A") > 3 * 40  # tqdm's nested bar: a move up per update
    s = Session()
    cuts = tail_cuts(data)
    for text in cuts:
        s.apply(Output(1.0, "stderr", text))
    lines = [ln.text for ln in s.snapshot().output]
    assert not [ln for ln in lines if "\x1b" in ln], lines
    assert [ln for ln in lines if ln.startswith("epoch ")] == [f"epoch {i} done" for i in range(3)]
    # a line per outer state and log line, and one per cut of an open bar's updates (as
    # for a bar alone, above); not a line per nested update (120)
    assert len(lines) <= 7 + len(cuts) < 3 * 40, (len(cuts), lines)
    assert lines[-1].startswith("train: 100%"), lines
    # rich's live display: hide the cursor, erase the line, move up; nothing of it shown
    assert terminal_lines("\x1b[?25l\x1b[2K\x1b[1Astep 3\x1b[?25h") == ["step 3"]
    # what a terminal would not just move over stays for visible(): a title, a clear,
    # the alternate screen
    evil = "\x1b]0;T\x07 \x1b[2J \x1b[?1049h"
    assert terminal_lines(evil) == [evil]


def test_a_bar_update_read_half_written_at_a_page_end_stays_the_bar(tmp_path):
    """A write grows the file page by page as the kernel copies it: a read can end at a
    page's end inside one of a bar's updates (seen once in ~3 runs of test_output_order:
    'fast bar 224/300' held as a line of its own). The rest of that update is the bar's,
    not another writer's text; text after a whole update still ends the bar's line."""
    from perftop.monitor.output import PAGE, OutputTail

    bars = [b"\rbar %d/3 " % i + b"#" * 10 for i in (1, 2, 3)]
    head = b"L" * (PAGE - len(bars[0]) - 7) + b"\n"
    first = head + bars[0] + bars[1][:6]  # ends at the page's end, inside bar 2/3
    assert len(first) == PAGE and first.endswith(b"\rbar 2")
    events: list[Output] = []
    tail = OutputTail(lambda *evs: events.extend(evs), directory=str(tmp_path))
    try:
        for piece in (first, bars[1][6:] + bars[2], b"log line\n"):
            tail.stderr.write(piece)
            tail.stderr.flush()
            tail.poll(order=["stderr"])
        tail.poll(final=True, order=["stderr"])
    finally:
        tail.stop()
    lines = [e.text for e in events if e.stream == "stderr"]
    assert lines == [head.decode(), bars[2].decode(), "log line\n"], lines
