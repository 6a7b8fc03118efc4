"""A capture's full trace (the hook's raw ``torch.profiler`` ``export_chrome_trace`` file)
with perftop's own step and phase tracks, and the same trace's events for ``export --chrome``.

The raw trace's timestamps are microseconds on the profiler's clock; adding the capture's
``clock_offset_us`` gives epoch microseconds (every event's ``time.time()`` clock). The
steps are added on the trace's own clock, on a thread of their own ("perftop steps") in
the process's track, so each op sits inside its step in Perfetto. Rewritten atomically
(a temporary file, then a rename): a reader sees the old file or the new one.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from perftop.events import Step
from perftop.export.steptrack import step_events

STEP_TID = 0x70657266  # the "perftop steps" thread of a process in a capture's trace
PROCESS_META = ("process_name", "process_labels", "process_sort_index")


class TraceError(ValueError):
    """A capture's trace that cannot be read (missing, not JSON, not a trace)."""


def read_trace(path: str | Path) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except OSError as exc:
        raise TraceError(f"cannot read the capture trace {path}: {exc.strerror}") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise TraceError(f"the capture trace {path} is not JSON: {exc}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        raise TraceError(f"the capture trace {path} has no traceEvents")
    return doc


def annotate(path: str | Path, steps: Sequence[Step], clock_offset_us: float) -> int:
    """Rewrite the trace at ``path`` with ``steps`` (those of the capture) as step and phase
    events on the trace's clock; returns how many events it added. Steps added before (an
    earlier call) are replaced, not doubled."""
    doc = read_trace(path)
    events = [e for e in doc["traceEvents"] if not _ours(e)]

    def us(t: float) -> float:
        return round(t * 1e6 - clock_offset_us, 3)

    added: list[dict[str, Any]] = []
    for pid in sorted({s.pid for s in steps}):
        added.append(_meta(pid, "thread_name", {"name": "perftop steps"}))
        added.append(_meta(pid, "thread_sort_index", {"sort_index": -1}))
    for s in steps:
        added.extend(step_events(s, s.pid, us, STEP_TID))
    doc["traceEvents"] = events + added
    other = doc.get("otherData")
    doc["otherData"] = {
        **(other if isinstance(other, dict) else {}),
        "perftop_steps": [s.index for s in steps],
    }
    _write_atomic(Path(path), doc)
    return len(added)


def shifted_events(
    path: str | Path, pid: int, track: int, clock_offset_us: float, start_t: float
) -> Iterator[dict[str, Any]]:
    """The trace's events for a session export: timestamps in microseconds since
    ``start_t``; the process ``pid`` on the export's track ``track`` (its step track is the
    export's own, so perftop's steps in the trace are left out, and so is its naming). The
    trace's other numbered tracks (a GPU's, numbered by device) become tracks of their own,
    ``"{track} device N"``: never the export's host track 0 or another process."""
    doc = read_trace(path)
    shift = clock_offset_us - start_t * 1e6
    for e in doc["traceEvents"]:
        if not isinstance(e, dict) or _ours(e):
            continue
        if e.get("pid") == pid:
            if e.get("ph") == "M" and e.get("name") in PROCESS_META:
                continue
            e = {**e, "pid": track}
        elif isinstance(e.get("pid"), int):
            e = {**e, "pid": f"{track} device {e['pid']}"}
        if isinstance(e.get("ts"), (int, float)):
            e = {**e, "ts": round(e["ts"] + shift, 3)}
        yield e


def _ours(e: Any) -> bool:
    return isinstance(e, dict) and e.get("tid") == STEP_TID


def _meta(pid: int, name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"ph": "M", "name": name, "pid": pid, "tid": STEP_TID, "args": args}


def _write_atomic(path: Path, doc: dict[str, Any]) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(doc, f, separators=(",", ":"))
        os.chmod(tmp, os.stat(path).st_mode & 0o777)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
