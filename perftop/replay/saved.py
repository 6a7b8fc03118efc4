"""The saved replay index: a sidecar ``FILE.index`` beside the recording.

Indexing a recording of a million steps takes about a minute; a replay that finds a saved
index opens and seeks at once. The sidecar holds the index's compressed model checkpoints one
after another, then a JSON table (checkpoint positions, timeline marks, what the reader
skipped) and a trailer pointing at it. It describes the recording it was built from (size,
CRCs of its head and tail): a recording that changed since, or a damaged or foreign sidecar,
is ignored and the index is built again (then saved where the folder is writable). The
recording itself is never written to, so every reader of the format reads it as before.

Checkpoints are pickled sessions, read back with an unpickler that only builds perftop's
own model classes and a few containers: a sidecar from elsewhere cannot run code.
Building and saving one after a recording closes is :mod:`perftop.replay.autosave`'s.
"""

from __future__ import annotations

import json
import os
import struct
import zlib
from pathlib import Path
from typing import Any

from perftop.replay.checkpoint import Checkpoint

SUFFIX = ".index"
MAGIC = b"PERFTOP-INDEX\x00\x01\n"
TRAILER = struct.Struct("<QQ16s")  # table offset, table length, MAGIC
VERSION = 9  # 6: the model's reducers and rows moved to modules of their own (pickled paths);
# 7: a step series keeps its steps' starts; 8: and its first step's end; 9: a loader the
# kind of interval it started in, a step series whether a torch.optim step closed any, a
# process when the probes first and last saw it
PROBE = 1 << 16  # bytes of the recording's head and tail whose CRCs identify it


def sidecar(path: str | os.PathLike[str]) -> Path:
    p = Path(path)
    return p.with_name(p.name + SUFFIX)


def fingerprint(path: Path) -> dict[str, int]:
    """What identifies the recording's content cheaply: its size and CRCs of both ends."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        head = f.read(PROBE)
        f.seek(max(0, size - PROBE))
        tail = f.read(PROBE)
    return {"size": size, "head": zlib.crc32(head), "tail": zlib.crc32(tail)}


def model_key() -> int:
    """What the pickled sessions depend on: the source of perftop's model, events and hints.
    A sidecar from another perftop is ignored and built again (its sessions may not fit)."""
    import perftop

    root, crc = Path(perftop.__file__).parent, 0
    for part in ("model", "events", "hints"):
        for f in sorted((root / part).glob("*.py")):
            crc = zlib.crc32(f.read_bytes(), crc)
    return crc


def save(index: Any) -> Path | None:
    """Write ``index`` (a built :class:`~perftop.replay.index.ReplayIndex`) beside its
    recording; None where that folder or file cannot be written (a replay goes on)."""
    out = sidecar(index.path)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    # As private as the recording it is made of (its sessions hold the job's output and
    # command line), and never through a link another user left at that name
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
    try:
        try:
            fd = os.open(tmp, flags, 0o600)
        except FileExistsError:  # a killed save's, of this process id: ours goes, or none
            tmp.unlink()
            fd = os.open(tmp, flags, 0o600)
    except OSError:
        return None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(MAGIC)
            rows = []
            for cp in index.checkpoints:
                blob = cp.blob()
                at = f.tell()
                f.write(blob)
                rows.append(
                    [cp.offset, cp.events, cp.last_t, sorted(cp.steps.items()), list(cp.hints),
                     [list(b) for b in cp.between], at, len(blob), cp.skip]
                )  # fmt: skip
            st = index.stats
            table = {
                "version": VERSION,
                "model": model_key(),
                "recording": fingerprint(index.path),
                "start_t": index.start_t,
                "end_t": index.end_t,
                "events": index.events,
                "steps": index.steps,
                "primary": index.primary,
                "stalls": index.stalls,
                "gaps": index.gaps,
                "hint_changes": index.hint_changes,
                "between_marks": index.between_marks,
                "stats": [st.frames, st.events, st.bad_frames, st.unknown_events,
                          st.truncated_bytes, st.warnings],
                "checkpoints": rows,
            }  # fmt: skip
            data = zlib.compress(json.dumps(table, separators=(",", ":")).encode(), 6)
            at = f.tell()
            f.write(data)
            f.write(TRAILER.pack(at, len(data), MAGIC))
        os.replace(tmp, out)
        return out
    except OSError:
        tmp.unlink(missing_ok=True)
        return None


def _own(st: os.stat_result) -> bool:
    """A sidecar this user wrote, that no one else may write: on a shared folder (``/tmp``)
    another user may leave one beside a recording, with figures of their own making."""
    return st.st_uid == os.geteuid() and not st.st_mode & 0o022


def load(index: Any) -> bool:
    """Fill ``index`` from its saved sidecar; False (and ``index`` untouched) when there is
    none, or it is damaged, from another perftop, or for another state of the recording."""
    path = sidecar(index.path)
    try:
        with open(os.open(path, os.O_RDONLY | os.O_NOFOLLOW), "rb") as f:
            if not _own(os.fstat(f.fileno())):
                return False
            if f.read(len(MAGIC)) != MAGIC:
                return False
            f.seek(-TRAILER.size, os.SEEK_END)
            at, n, magic = TRAILER.unpack(f.read(TRAILER.size))
            if magic != MAGIC:
                return False
            f.seek(at)
            table = json.loads(zlib.decompress(f.read(n)))
        if (
            table.get("version") != VERSION
            or table.get("model") != model_key()
            or table["recording"] != fingerprint(index.path)
        ):
            return False
        cps = [
            Checkpoint(off, ev, last_t, {int(p): k for p, k in steps}, None, tuple(hints),
                       tuple((kind, c) for kind, c in between), (str(path), pos, size), skip)
            for off, ev, last_t, steps, hints, between, pos, size, skip in table["checkpoints"]
        ]  # fmt: skip
    except (OSError, ValueError, KeyError, TypeError, zlib.error, struct.error):
        return False
    st = index.stats
    (st.frames, st.events, st.bad_frames, st.unknown_events, st.truncated_bytes) = table["stats"][
        :5
    ]
    st.warnings = list(table["stats"][5])
    index.checkpoints = cps
    index.stalls = [tuple(m) for m in table["stalls"]]
    index.gaps = [tuple(m) for m in table["gaps"]]
    index.hint_changes = [tuple(m) for m in table["hint_changes"]]
    index.between_marks = [tuple(m) for m in table["between_marks"]]
    index.start_t, index.end_t = table["start_t"], table["end_t"]
    index.events, index.steps, index.primary = table["events"], table["steps"], table["primary"]
    index.progress, index.done, index.loaded = 1.0, True, True
    return True
