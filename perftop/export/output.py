"""Files an export writes: a failed write names its file, and what was written is removed.

A full disk or a read-only folder must give one line that says which file could not be
written, and leave no half-written trace or CSV behind that a tool would take as whole.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path


class OutFile:
    """A text file being written; any ``OSError`` is raised again with its path."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        with self._named():
            self._f = open(self.path, "w", newline="", encoding="utf-8")  # noqa: SIM115

    @contextlib.contextmanager
    def _named(self) -> Iterator[None]:
        try:
            yield
        except OSError as exc:
            raise OSError(exc.errno, exc.strerror, str(self.path)) from None

    def write(self, text: str) -> int:
        with self._named():
            return self._f.write(text)

    def close(self) -> None:
        with self._named():
            self._f.close()

    def discard(self) -> None:
        """Close (quietly: the disk may still be full) and remove the file."""
        with contextlib.suppress(OSError):
            self._f.close()
        with contextlib.suppress(OSError):
            self.path.unlink()


@contextlib.contextmanager
def outputs(paths: list[Path]) -> Iterator[list[OutFile]]:
    """Open ``paths`` for writing; on any error (opening one, writing, closing) every file
    this call created is removed before the error goes on."""
    files: list[OutFile] = []
    try:
        for p in paths:
            files.append(OutFile(p))
        yield files
        for f in files:
            f.close()
    except BaseException:
        for f in files:
            f.discard()
        raise
