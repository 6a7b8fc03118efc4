"""Which of the collector's refusals are told, and with what words.

Anyone who can reach the collector's port can be refused, as fast as they can connect, and
choose what they send. So a refusal's line carries no text of theirs: its reason is one of
a few fixed phrases (:data:`REASONS`) and its peer is the address the kernel gave. Lines are
rate-limited per peer address (the first refusal, then the 10th, 100th, ...), and at most
:data:`LINES_PER_WINDOW` lines go out in any :data:`WINDOW_S` whatever the number of
addresses (an IPv6 or loopback flood has millions); how many were not told is said with
the next line. The counts per address are kept for the :data:`MAX_PEERS` most recent peers
only: memory stays flat under any flood.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable

from perftop.fleet.link import WRONG_FORMAT

REASONS = (
    "no handshake in time",
    "not a perftop forwarder",
    "wrong token",
    "no node name",
    WRONG_FORMAT,
)
MAX_PEERS = 1024
LINES_PER_WINDOW = 10
WINDOW_S = 60.0


def _round(n: int) -> bool:
    """1, 10, 100, ...: the counts at which a peer's refusals are told again."""
    return n == 1 or (str(n).rstrip("0") == "1" and n > 1)


class Refusals:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.total = 0
        self._clock = clock
        self._peers: OrderedDict[str, int] = OrderedDict()  # address -> refusals, LRU
        self._window = -WINDOW_S
        self._lines = 0
        self._untold = 0  # lines not told since the last one: over the window's count

    def refuse(self, address: str, why: str) -> str | None:
        """Count a refusal of ``address`` for ``why`` (one of :data:`REASONS`; anything
        else is told as the first); the line to tell, or None."""
        self.total += 1
        if why not in REASONS:
            why = REASONS[1]
        n = self._peers.pop(address, 0) + 1
        self._peers[address] = n
        if len(self._peers) > MAX_PEERS:
            self._peers.popitem(last=False)
        now = self._clock()
        if now - self._window >= WINDOW_S:
            self._window, self._lines = now, 0
        if not _round(n):
            return None  # its count, when told next, says these
        if self._lines >= LINES_PER_WINDOW:
            self._untold += 1
            return None
        self._lines += 1
        text = f"refused a forwarder from {address}: {why}" + (f" ({n:,} times)" if n > 1 else "")
        if self._untold:
            text += f"; {self._untold:,} more refusals of other peers not told (too many)"
            self._untold = 0
        return text

    @property
    def peers(self) -> int:
        return len(self._peers)
