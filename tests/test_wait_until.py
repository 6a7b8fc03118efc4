"""The headless wait of every flow: a stop signal ends it; an ignored one stays ignored."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable

from perftop.flows.watch import wait_until


def hang_up_once() -> Callable[[], bool]:
    """A ``done`` that sends this process SIGHUP the first time it is asked."""
    sent: list[None] = []

    def done() -> bool:
        if not sent:
            sent.append(os.kill(os.getpid(), signal.SIGHUP))
        return False

    return done


def test_a_signal_asked_for_ends_the_wait_and_the_handler_is_restored() -> None:
    # The suite may run under nohup (CI started in the background): SIGHUP inherited as
    # SIG_IGN, which wait_until rightly keeps ignored. This test needs it not ignored.
    old = signal.signal(signal.SIGHUP, signal.SIG_DFL)
    try:
        t0 = time.monotonic()
        wait_until(30.0, hang_up_once(), (signal.SIGTERM, signal.SIGHUP))
        assert time.monotonic() - t0 < 5  # SIGHUP ended it, not the 30 s
        assert signal.getsignal(signal.SIGHUP) is signal.SIG_DFL
    finally:
        signal.signal(signal.SIGHUP, old)


def test_a_signal_the_process_ignores_stays_ignored() -> None:
    """As under ``nohup``: a hang-up neither ends the wait nor the process."""
    old = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        t0 = time.monotonic()
        wait_until(1.0, hang_up_once(), (signal.SIGTERM, signal.SIGHUP))
        assert time.monotonic() - t0 >= 0.95  # the duration ended it
        assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGHUP, old)
