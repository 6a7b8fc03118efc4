"""Sending from the training thread while the job's process has no other thread.

A second thread costs a single-threaded job on every step, whatever that thread does: glibc
(2.34 and later) locks a mutex and a malloc arena without an atomic instruction while
``__libc_single_threaded`` is set, and creating any thread clears it for good. Torch takes a
mutex and mallocs many times a step (``AutogradMeta::fw_grad``'s lock per tensor in
``torch.stack``), so a sleeping sender thread made a tight CPU step (two Linear layers, one
torch thread) about 1-2 µs slower (medians of +1.8 µs in two interleaved runs;
``docs/benchmarks.md``).

So the hook starts no thread of its own in a single-threaded process. The training thread
sends what is buffered itself, at most every ``Sender.interval`` seconds, at a step's end
(the tracker compares the step's end with ``flush_at``: one C comparison a step) or when an
event is put. Those sends never wait: the socket is non-blocking, what it does not take is
kept and sent first next time, and while any of it is left nothing more is encoded (the
steps wait in the bounded deque, which drops and counts as always). Once the process has
another thread (a DataLoader's pin-memory thread, CUDA's, the job's own), that flag is
cleared anyway and the sender's thread takes over, as on a platform without the flag.

What this changes for the monitor: between steps (a long evaluation, a hang) buffered steps
wait for the next step's end or event (a pass's forward calls send too, when a send is
due); notes go out at once (``put(urgent=True)``), and an interval's start too, but after a
short pass only once a second (``HookState.opened``); an op capture's ask is read at the
next send.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

INF = float("inf")


def single_threaded_flag() -> Callable[[], bool] | None:
    """A zero-argument callable that reads glibc's ``__libc_single_threaded``, or None where
    there is no such flag (another C library, macOS): there the sender always has a thread.
    Set ``PERFTOP_SENDER_THREAD=1`` to always use the thread."""
    import os

    if not sys.platform.startswith("linux") or os.environ.get("PERFTOP_SENDER_THREAD"):
        return None
    try:
        import ctypes

        flag = ctypes.c_char.in_dll(ctypes.CDLL(None), "__libc_single_threaded")
    except Exception:  # not glibc, or older than 2.32
        return None

    def single() -> bool:
        return flag.value != b"\x00"

    return single
