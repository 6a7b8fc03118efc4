"""Bounds on the job's output as perftop takes it in (see :mod:`perftop.monitor.output`):
however fast the job prints, the monitor's memory, its recording and the output files stay
bounded, and what is left out is counted and said.

- Each stream is read ``READ_MAX`` bytes at most per poll.
- Output events carry ``EVENT_MAX`` bytes at most (long lines are cut into pieces), so a
  frame of them is always one the reader takes.
- Each stream's events are rate-limited by a token bucket (``RATE`` bytes a second, bursts
  of ``BURST``); past it the output is left out, and one marker line a second says how much
  (``[perftop: N bytes of output left out …]``).
- Without a relay, the unread backlog is skipped at once when it is over the bucket: the
  newest output is what is shown, the files' blocks are freed (the disk stays bounded).
"""

from __future__ import annotations

RATE = 1 << 20  # bytes per second per stream, in events
BURST = 8 << 20  # bytes a stream may send at once before the rate holds
READ_MAX = 8 << 20  # bytes read per stream per poll
EVENT_MAX = 64 << 10  # bytes of output per event
MARK_EVERY_S = 1.0


def marker(left_out: int) -> str:
    """The line that stands for output left out."""
    return (
        f"[perftop: {left_out} bytes of output left out (over {RATE >> 20} MiB/s; "
        "the job's own output is unchanged)]\n"
    )


class Bucket:
    """A token bucket of ``BURST`` bytes refilled at ``RATE`` a second."""

    def __init__(self, now: float, rate: float = RATE, burst: float = BURST) -> None:
        self.rate, self.burst = rate, burst
        self.tokens = burst
        self.t = now

    def allow(self, want: int, now: float) -> int:
        """How many of ``want`` bytes may go now (taken from the bucket)."""
        self.tokens = min(self.burst, self.tokens + (now - self.t) * self.rate)
        self.t = now
        got = max(0, min(want, int(self.tokens)))
        self.tokens -= got
        return got


def pieces(data: bytes, size: int = EVENT_MAX) -> list[bytes]:
    """``data`` in pieces of at most ``size`` bytes, each ending at a newline where one
    lies in it, else cut before a UTF-8 character's continuation bytes."""
    out = []
    pos, n = 0, len(data)
    while n - pos > size:
        end = data.rfind(b"\n", pos, pos + size) + 1
        if end <= pos:
            end = pos + size
            back = end
            while back > pos + size - 4 and data[back] & 0xC0 == 0x80:
                back -= 1  # not inside a character
            end = back if back > pos else end
        out.append(data[pos:end])
        pos = end
    if pos < n:
        out.append(data[pos:])
    return out
