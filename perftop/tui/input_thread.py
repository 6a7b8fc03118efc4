"""The terminal's input thread, asleep until a key, a resize report or the end.

Textual's Linux driver reads the terminal on a thread of its own that polls: ``select``
with a 0.1 s timeout, so it wakes ten times a second with nothing to read (a tenth of a
percent of a core, and ten context switches a second, for a monitor meant to be as light
as htop). The timeout serves two things: the parser's escape timeout (a lone ESC is the
Escape key once no sequence follows it in time) and noticing the driver's exit event. Here
the thread waits for input, for the parser's own deadline where it has one, or for the exit
event, which wakes it through a pipe; at most ``IDLE_S`` in any case. Where the parser has
no deadline to tell, or cannot be made as here (another Textual), it polls as Textual does.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import threading
from codecs import getincrementaldecoder
from typing import Any

IDLE_S = 2.0  # the longest wait: a safety net, should a wake-up ever be missed
POLL_S = 0.1  # Textual's own


class WakingEvent(threading.Event):
    """The driver's exit event: setting it also wakes the input thread's ``select``."""

    def __init__(self) -> None:
        super().__init__()
        self.fd_read, self.fd_write = os.pipe()  # not inherited by the job (PEP 446)
        os.set_blocking(self.fd_read, False)
        os.set_blocking(self.fd_write, False)
        self.closed = False

    def set(self) -> None:
        super().set()
        if not self.closed:  # (a closed pipe's number may be another file's by now)
            with contextlib.suppress(OSError):  # full: woken already
                os.write(self.fd_write, b"x")

    def drain(self) -> None:
        with contextlib.suppress(OSError):
            while os.read(self.fd_read, 512):
                pass

    def close(self) -> None:
        self.closed = True
        for fd in (self.fd_read, self.fd_write):
            with contextlib.suppress(OSError):
                os.close(fd)


class QuietInput:
    """A mixin for Textual's Linux driver (before it in the bases)."""

    fileno: int
    exit_event: Any
    _debug: bool
    process_message: Any  # Textual's driver's (a method there: not defined here)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.exit_event = WakingEvent()

    def run_input_thread(self) -> None:
        """Textual's loop (read, parse, dispatch, then the parser's timeouts), waiting as
        long as nothing can be due."""
        try:
            from textual._xterm_parser import XTermParser

            parser = XTermParser(self._debug)
        except Exception:  # another Textual's parser: its own loop, polling
            super().run_input_thread()  # type: ignore[misc]
            return
        wake: WakingEvent = self.exit_event
        sel = selectors.SelectSelector()
        sel.register(self.fileno, selectors.EVENT_READ)
        sel.register(wake.fd_read, selectors.EVENT_READ)
        decode = getincrementaldecoder("utf-8")().decode

        def handle(ready: list[tuple[selectors.SelectorKey, int]], final: bool = False) -> None:
            for key, _mask in ready:
                if key.fd == wake.fd_read:
                    wake.drain()
                    continue
                text = decode(os.read(self.fileno, 4096), final=final)
                if not text:  # a piped stdin's end
                    break
                for event in parser.feed(text):
                    self.process_message(event)
            for event in parser.tick():
                self.process_message(event)

        try:
            while not wake.is_set():
                handle(sel.select(_timeout(parser)))
            sel.unregister(self.fileno)
            handle(sel.select(0.0), final=True)
        finally:
            sel.close()
            with contextlib.suppress(Exception):  # (its end: EOFError, ParseError)
                for _ in parser.feed(""):
                    pass

    def close(self) -> None:
        super().close()  # type: ignore[misc]
        self.exit_event.close()


def _timeout(parser: Any) -> float:
    """How long the thread may sleep: until the parser's escape deadline, if any."""
    try:
        due = parser._timeout_time
    except AttributeError:
        return POLL_S
    if due is None:
        return IDLE_S
    from textual._time import get_time

    return min(IDLE_S, max(0.0, due - get_time()))
