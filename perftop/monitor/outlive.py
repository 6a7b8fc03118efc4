"""When the job's top process is a wrapper (``sh -c``, a launcher script) that ends before
its training: the session lasts while any hooked process of the job lives.

The monitor makes itself a child subreaper (Linux ``PR_SET_CHILD_SUBREAPER``) before it
starts the job, so the wrapper's orphans become its children: it can wait for them and
know their exit status, rather than only seeing them gone. Where that is not possible (no
prctl, a background monitor that is not their parent) it watches them go, exit unknown.

A process the wrapper left behind that never said a word to the hook (a trainer sent to the
background, ``python train.py &``, that had not reached its first step when the wrapper
ended; a daemon) is not followed: nothing says it is training, and a daemon would hold
the session open for good. It is named instead (:func:`strays`), so a session that saw no
steps does not leave its user guessing why.
"""

from __future__ import annotations

import ctypes
import os
import time
from collections.abc import Collection

import psutil

from perftop.fmt import clip, command
from perftop.model.snapshot import ended_words
from perftop.probes.alive import alive
from perftop.safe import visible_line

PR_SET_CHILD_SUBREAPER = 36
POLL_S = 0.1
STRAY_GRACE_S = 1.0  # a process left running that ends this soon after the top one: not named


def become_subreaper() -> bool:
    """Adopt this process's orphaned descendants (cleared in forked children)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def survivors(peers: Collection[int], top: int) -> list[int]:
    """The hooked processes of the job still alive, but its top process."""
    return [p for p in list(peers) if p != top and alive(p)]


def strays(
    top: int, key: str, value: str, known: Collection[int], grace: float = STRAY_GRACE_S
) -> list[tuple[int, str]]:
    """The job's processes left running by its top process that its hook never connected
    from: this monitor's children (as a subreaper it adopts the job's orphans) whose
    environment carries the job's own ``key=value`` (perftop's helpers do not), but ``top``
    and the ``known`` peers (a killed training's DataLoader workers, which soon exit); with
    their command lines (cut, made safe: the job's to choose). Those that end within
    ``grace`` seconds are not left running: multiprocessing's resource tracker, which
    exits once its last user has (named as left running after one run in three)."""
    deadline = time.monotonic() + grace
    while True:
        out = _left_running(top, key, value, known)
        if not out or time.monotonic() >= deadline:
            return out
        time.sleep(POLL_S)


def _left_running(top: int, key: str, value: str, known: Collection[int]) -> list[tuple[int, str]]:
    out: list[tuple[int, str]] = []
    try:
        kids = psutil.Process().children()
    except psutil.Error:
        return out
    for p in kids:
        if p.pid == top or p.pid in known:
            continue
        try:
            with p.oneshot():
                if p.status() == psutil.STATUS_ZOMBIE or p.environ().get(key) != value:
                    continue
                argv = p.cmdline()
                cmd = command(argv) if argv else p.name()
        except psutil.Error:
            continue
        cmd = visible_line(cmd)
        out.append((p.pid, clip(cmd, 60)))
    return sorted(out)


def _reap(pid: int) -> int | None:
    """``pid``'s exit code (128+N for signal N) if it was our child and has ended."""
    try:
        done, status = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return None
    if done != pid:
        return None
    return os.WEXITSTATUS(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status)


class Outlived:
    """What happened after the wrapper ended: computed once (:meth:`wait`), read by all."""

    def __init__(self, command: str, top: int, top_code: int, top_signal: int = 0) -> None:
        self.command = command
        self.top = top
        self.top_code = top_code
        self.top_signal = top_signal  # the signal that killed it, from its wait status; 0
        self.followed: list[int] = []  # the survivors perftop followed to their end
        self.code: int | None = None  # the training's own exit code, where it was ours
        self.strays: list[tuple[int, str]] = []  # left running, not followed (strays())
        self.final = top_code  # the session's exit code, once :meth:`wait` returned

    def wait(self, peers: Collection[int]) -> int:
        """Until no hooked process of the job lives; the job's exit code as best known:
        the wrapper's own when it exited by itself, else the training's when known."""
        codes: dict[int, int] = {}
        while True:
            left = survivors(peers, self.top)
            for p in left:
                if p not in self.followed:
                    self.followed.append(p)
            for p in self.followed:
                if p not in codes:
                    code = _reap(p)
                    if code is not None:
                        codes[p] = code
            if not [p for p in left if p not in codes]:
                break
            time.sleep(POLL_S)
        mine = [codes[p] for p in self.followed if p in codes]
        if mine:
            self.code = next((c for c in mine if c), 0)
        if self.top_code >= 128 and self.code is not None:
            self.final = self.code
        return self.final

    def _how(self) -> str:
        return ended_words(self.top_code, self.top_signal)

    def stray_words(self) -> str:
        """What was left running and not followed (:attr:`strays`), in one sentence."""
        n = len(self.strays)
        shown = "; ".join(f"pid {pid} ({cmd})" for pid, cmd in self.strays[:3])
        more = f"; {n - 3} more" if n > 3 else ""
        return (
            f"the job's top process ({self.command}, pid {self.top}) {self._how()} and left "
            f"{n} process{'es' if n > 1 else ''} running that perftop does not follow "
            f"(no step or word from its hook): {shown}{more}"
        )

    def line(self) -> str:
        """The one line that says what happened."""
        if not self.followed:
            return "perftop: " + self.stray_words()
        how = self._how()
        pids = ", ".join(str(p) for p in self.followed)
        end = f"code {self.code}" if self.code is not None else "an exit code perftop cannot know"
        return (
            f"perftop: the job's top process ({self.command}, pid {self.top}) {how}; its "
            f"training (pid {pids}) went on, followed until it exited with {end}"
        )
