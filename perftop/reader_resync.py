"""Finding where reading resumes past damage in a recording: the next whole frame of a
known kind whose CRC checks, searched a block at a time, over runs of zeros at C speed,
with a bound on the work each block may take. Apart from :mod:`perftop.reader`'s scanner,
which only asks where to go on.
"""

from __future__ import annotations

import re
import zlib
from typing import IO

from perftop.wire import HEADER, MAX_FRAME

RESYNC_BLOCK = 1 << 20  # bytes searched at a time for the next good frame
# The work one block's search may take (bytes CRC-checked, 256 a try): noise made to look
# like headers everywhere costs that, then the rest of its block is skipped unsearched.
RESYNC_COST = 8 * RESYNC_BLOCK
_KIND_FIELD = re.compile(rb"(?=\x00\x00\x00[\x00-\x03])")  # a known kind (0-3), big-endian


class Resync:
    """Mixed into :class:`perftop.reader.FrameScanner`: the open file and its size."""

    f: IO[bytes]
    size: int

    def resync(self, start: int) -> int | None:
        """The first offset from ``start`` where a whole frame of a known kind with a
        matching CRC lies: a random byte string passes with odds of about 2**-32."""
        f, size, at = self.f, self.size, start
        while at + HEADER.size <= size:
            f.seek(at)
            buf = f.read(RESYNC_BLOCK + HEADER.size)
            found = self._candidate(buf, at)
            if found is not None:
                return found
            at += RESYNC_BLOCK
        return None

    def _candidate(self, buf: bytes, at: int) -> int | None:
        """The first good frame's offset in ``buf`` (read at ``at``), or None. A run of
        zeros (a crash's tail, a hole) is stepped over at C speed, not tried byte by byte:
        a frame's length field is not zero. At most ``RESYNC_COST`` of work a block."""
        f, size, i, cost = self.f, self.size, 8, 0
        while cost < RESYNC_COST:
            m = _KIND_FIELD.search(buf, i)  # the lookahead sees the whole header
            if m is None or m.start() - 8 >= RESYNC_BLOCK:  # the next block's
                return None
            c = m.start() - 8
            i = m.start() + 1
            length, crc, _kind = HEADER.unpack_from(buf, c)
            if length == 0:  # a zero run: on to 3 bytes before its next non-zero byte
                i = max(i, _zeros_end(buf, c) - 3 + 8)
                continue
            if length > MAX_FRAME or at + c + HEADER.size + length > size:
                continue
            cost += length + 256  # bytes checked, and the try itself
            end = c + HEADER.size + length
            if end <= len(buf):
                payload = buf[c + HEADER.size : end]
            else:
                f.seek(at + c + HEADER.size)
                payload = f.read(length)
            if zlib.crc32(payload) == crc:
                return at + c
        return None


def _zeros_end(buf: bytes, at: int) -> int:
    """Where the run of zero bytes at ``at`` in ``buf`` ends: looked at in windows that
    double (``lstrip`` runs at memory speed; a short run costs a short window)."""
    win = 64
    while at < len(buf):
        piece = buf[at : at + win]
        rest = len(piece.lstrip(b"\x00"))
        if rest:
            return at + len(piece) - rest
        at += len(piece)
        win *= 2
    return len(buf)
