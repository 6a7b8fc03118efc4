"""The output tail sleeps while the job writes nothing and wakes at each write (inotify):
each wake-up of an idle thread costs ~0.3 ms of CPU, and a tail that read ten times a
second took a third of a percent of a core beside a job printing a line a second. A line
still shows at once, and a prompt (a line with no newline) when the TUI asks for it."""

from __future__ import annotations

import os
import threading
import time

from perftop.monitor import output
from perftop.monitor.output import OutputTail


def test_an_idle_tail_sleeps_and_wakes_at_each_write_and_prompt(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(
        output, "IDLE_S", 60.0, raising=False
    )  # a line seen below comes from a wake-up
    got: list[str] = []
    cond = threading.Condition()

    def submit(*events) -> None:
        with cond:
            got.extend(e.text for e in events)
            cond.notify_all()

    def shows(text: str) -> bool:
        with cond:
            return cond.wait_for(lambda: any(text in t for t in got), timeout=10)

    tail = OutputTail(submit, directory=str(tmp_path))
    if tail._order.fd < 0:  # no inotify here: the tail reads every POLL_S instead
        tail.stop()
        raise AssertionError("inotify is not available")
    polls = 0
    poll = tail.poll

    def counted(*args, **kwargs):
        nonlocal polls
        polls += 1
        return poll(*args, **kwargs)

    tail.poll = counted  # type: ignore[method-assign]
    tail.start()
    fd = os.open(tail.paths["stdout"], os.O_WRONLY | os.O_APPEND)
    try:
        for i in range(4):
            os.write(fd, f"step {i}\n".encode())
            assert shows(f"step {i}")
            time.sleep(0.5)
        # a read and a send per write, and one for the tail's own punch of what it read
        assert polls <= 4 * 3, polls
        os.write(fd, b"overwrite? [y/N] ")  # held for its newline...
        time.sleep(0.3)
        assert not any("overwrite?" in t for t in got)
        tail.show_partial()  # ...until the TUI sees the job wait on its stdin
        assert shows("overwrite?")
    finally:
        os.close(fd)
        tail.stop()
