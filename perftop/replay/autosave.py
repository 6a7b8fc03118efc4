"""Save a recording's replay index when the recording closes (the sidecar is
:mod:`perftop.replay.saved`'s format): at once for a small recording, else in a detached
low-priority process, so quitting never waits.

    python -m perftop.replay.autosave FILE    # build and save FILE's index (after recording)
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from perftop.replay import saved
from perftop.replay.index import ReplayIndex

INLINE_BYTES = 256 << 10  # a closing recording this small is indexed at once, in process


def index_after_recording(path: str | os.PathLike[str]) -> None:
    """Save the index of a recording that just closed: at once when it is small, else by a
    detached low-priority process, so quitting never waits for a minute of indexing."""
    p = Path(path)
    try:
        size = p.stat().st_size
    except OSError:
        return
    if size <= INLINE_BYTES:
        build_and_save(p)
        return
    try:
        subprocess.Popen(
            [sys.executable, "-m", "perftop.replay.autosave", str(p)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True,
        )  # fmt: skip
    except OSError:
        pass  # a replay builds the index itself


def build_and_save(path: Path) -> Path | None:
    index = ReplayIndex(path)
    try:
        index.build()
        return saved.save(index)
    except Exception:
        return None


def main(argv: list[str]) -> int:
    if hasattr(os, "nice"):
        os.nice(10)  # after a recording closed: behind whatever runs next
    if len(argv) != 1:
        print("usage: python -m perftop.replay.autosave RECORDING", file=sys.stderr)
        return 2
    out = build_and_save(Path(argv[0]))
    if out is None:
        print(f"perftop: {argv[0]}: index not saved", file=sys.stderr)
        return 1
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
