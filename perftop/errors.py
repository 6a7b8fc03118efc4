"""One error hierarchy; the CLI maps it to a one-line message and an exit code."""

from __future__ import annotations


class PerftopError(Exception):
    """An expected failure the user can act on: shown as one line, never a traceback."""

    exit_code = 1


class UsageError(PerftopError):
    """Bad options or arguments."""

    exit_code = 2


class RecordingError(PerftopError):
    """A recording that cannot be read: missing, empty, corrupt or foreign."""

    exit_code = 3


class LaunchError(PerftopError):
    """The job could not be started (command not found, not executable)."""

    exit_code = 127


class MissingDependency(PerftopError):
    """An optional package a command needs is not installed (e.g. torch for the demo)."""

    exit_code = 1


class AttachError(PerftopError):
    """The target cannot be attached to: gone, another user's, or not reachable."""

    exit_code = 4


class ScreenFailed(PerftopError):
    """The TUI of a viewer (replay, attach) failed; its traceback was saved to a file."""

    exit_code = 1
