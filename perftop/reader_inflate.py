"""The inner frames of a recording's compressed frame, and what a broken one still gives,
within the limits a writer never passes (more is a bomb, or noise made to be slow). Apart
from :mod:`perftop.reader`'s scanner, which follows the deflate streams and their damage.
"""

from __future__ import annotations

import zlib

from perftop.wire import HEADER, MAX_FRAME, Frame

MAX_INNER = 1 << 16  # frames read from one compressed frame (a writer holds ~1 MiB of them)
# The most one compressed frame inflates to: what a writer ever held before a flush (its
# PENDING_MAX of 1 MiB and one frame of MAX_FRAME). More is a bomb, read as damage.
INFLATE_MAX = MAX_FRAME + (1 << 20) + 2 * HEADER.size


def inner_frames(data: bytes) -> tuple[list[Frame], int]:
    """Whole frames with a good CRC in decompressed ``data``, and how many were bad."""
    out: list[Frame] = []
    pos, n, bad = 0, len(data), 0
    while n - pos >= HEADER.size:
        if len(out) + bad >= MAX_INNER:  # more than any writer holds: the rest is skipped
            bad += 1
            break
        length, crc, kind = HEADER.unpack_from(data, pos)
        end = pos + HEADER.size + length
        if end > n or not length:
            bad += 1  # cut by the end of a truncated or damaged stream, or zeros: no frame
            break
        payload = data[pos + HEADER.size : end]
        pos = end
        if zlib.crc32(payload) != crc:
            bad += 1
            continue
        out.append(Frame(kind, payload))
    return out, bad


def salvage(inflate: zlib._Decompress, data: bytes, piece: int = 512) -> bytes:
    """What ``inflate`` gives for ``data`` up to the first error, a piece at a time, and
    ``INFLATE_MAX`` bytes at most."""
    out, room = [], INFLATE_MAX
    for i in range(0, len(data), piece):
        try:
            got = inflate.decompress(data[i : i + piece], room)
        except zlib.error:
            break
        out.append(got)
        room -= len(got)
        if room <= 0 or inflate.unconsumed_tail:
            break
    return b"".join(out)
