"""The files the job's stdout and stderr go to (see :mod:`perftop.monitor.output`), kept
small on disk whatever the run's length, and never a reason for the job's writes to fail.

- What was read is punched out (``fallocate(PUNCH_HOLE)``): the job's offset grows, the
  blocks do not; the files are sparse.
- Space is reserved ahead of the job's writes (``fallocate(KEEP_SIZE)``), so a filesystem
  filled by someone else does not fail the job's next ``RESERVE`` bytes.
- A keeper process, started beside the monitor, waits on a pipe only the monitor holds.
  When the monitor goes without closing the files (``kill -9``), the keeper punches out
  everything the job writes until no process holds the files any more, then removes them.
- A directory whose owners are all gone (the lock file is free) is cleaned by the next
  ``perftop ls``: a file still held by a live process is truncated, the others removed.

This file runs as a script too (the keeper, ``python -I -S outfiles.py DIR FD``): standard
library only, no perftop import.
"""

from __future__ import annotations

import ctypes
import fcntl
import os
import re
import signal
import stat
import sys
import time

LOCK = "lock"
LOGS = ("stdout.log", "stderr.log")
PREFIX = "perftop-out-"
RESERVE = 1 << 20  # bytes reserved ahead of each file's end
PAGE = 4096
KEEP_POLL_S = 0.05
SCAN_EVERY_S = 1.0
YOUNG_S = 60.0  # a directory without its lock file yet may be being created

_FALLOC_KEEP_SIZE = 0x01
_FALLOC_PUNCH_HOLE = 0x02
_libc = None


def _fallocate(fd: int, mode: int, offset: int, length: int) -> bool:
    global _libc
    try:
        if _libc is None:
            _libc = ctypes.CDLL(None, use_errno=True)
            _libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
        return bool(_libc.fallocate(fd, mode, offset, length) == 0)
    except (OSError, AttributeError):
        return False


def punch(fd: int, start: int, end: int) -> int:
    """Free the whole pages of ``[start, end)``; returns where the next punch starts."""
    end -= end % PAGE
    if end > start and _fallocate(fd, _FALLOC_PUNCH_HOLE | _FALLOC_KEEP_SIZE, start, end - start):
        return end
    return start


def reserve(fd: int, size: int, until: int) -> int:
    """Keep ``RESERVE`` bytes allocated past ``size`` (as much as the filesystem has);
    returns how far the reservation now goes."""
    if until - size >= RESERVE // 2:
        return until
    want = RESERVE
    while want >= PAGE:
        if _fallocate(fd, _FALLOC_KEEP_SIZE, size, want):
            return size + want
        want //= 2
    return until


def hold(directory: str, how: int = fcntl.LOCK_SH) -> int:
    """The directory's lock file, locked (an owner holds it shared while it lives)."""
    fd = os.open(os.path.join(directory, LOCK), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, how)
    except OSError:
        os.close(fd)
        raise
    return fd


def holders(paths: list[str]) -> bool:
    """Whether another process has one of ``paths`` open (read from /proc/*/fd)."""
    ids = set()
    for p in paths:
        try:
            st = os.stat(p)
            ids.add((st.st_dev, st.st_ino))
        except OSError:
            pass
    return _held(ids)


def _held(ids: set[tuple[int, int]]) -> bool:
    """Whether another process has a file of these (device, inode) open."""
    me = str(os.getpid())
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or pid == me:
            continue
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                st = os.stat(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if (st.st_dev, st.st_ino) in ids:
                return True
    return False


def remove(directory: str) -> None:
    for name in (*LOGS, LOCK):
        try:
            os.unlink(os.path.join(directory, name))
        except OSError:
            pass
    try:
        os.rmdir(directory)
    except OSError:
        pass


def keep(directory: str, lifeline: int) -> None:
    """The keeper: idle until the monitor's end of ``lifeline`` closes; then, while the
    job's processes still hold the files, punch out what they write; then remove them."""
    lock = hold(directory)
    try:
        while True:
            try:
                os.read(lifeline, 1)
                break
            except InterruptedError:
                continue
    except OSError:
        pass
    paths = [os.path.join(directory, n) for n in LOGS]
    fds = []
    for p in paths:
        try:
            fds.append([os.open(p, os.O_WRONLY | os.O_CLOEXEC), 0, 0])
        except OSError:
            pass
    next_scan = 0.0
    while True:
        for f in fds:
            try:
                size = os.fstat(f[0]).st_size
            except OSError:
                continue
            f[1] = punch(f[0], f[1], size)
            f[2] = reserve(f[0], size, f[2])
        now = time.monotonic()
        if now >= next_scan:
            if not holders(paths):
                break
            next_scan = now + SCAN_EVERY_S
        time.sleep(KEEP_POLL_S)
    for f in fds:
        os.close(f[0])
    remove(directory)
    os.close(lock)


_NAME = re.compile(re.escape(PREFIX) + r"[A-Za-z0-9_]+\Z")  # as mkdtemp names them
_NOFOLLOW = os.O_NOFOLLOW | os.O_CLOEXEC


def clean_left_behind(tmpdir: str) -> int:
    """Clean the output directories no live monitor or keeper owns; returns how many
    files were removed or truncated.

    ``tmpdir`` is shared: anyone may plant a ``perftop-out-*`` directory there, with links
    in it to other users' files. Only a real directory of this user's that nobody else may
    write to is cleaned, only its ``stdout.log`` and ``stderr.log`` (real files of this
    user's) and its lock, each opened through no link (``O_NOFOLLOW``, relative to the
    directory opened the same way): cleaning never reaches another file."""
    n = 0
    try:
        names = [d for d in os.listdir(tmpdir) if _NAME.match(d)]
    except OSError:
        return 0
    for name in names:
        try:
            dfd = os.open(os.path.join(tmpdir, name), os.O_RDONLY | os.O_DIRECTORY | _NOFOLLOW)
        except OSError:
            continue  # a link, a file, or not ours to open
        try:
            n += _clean(dfd, os.path.join(tmpdir, name))
        finally:
            os.close(dfd)
    return n


def _ours(st: os.stat_result) -> bool:
    return st.st_uid == os.geteuid() and not st.st_mode & 0o022


def _clean(dfd: int, d: str) -> int:
    n = 0
    try:
        st = os.fstat(dfd)
        if not _ours(st):
            return 0  # another user's (or open to others): not ours to clean
        young = time.time() - st.st_mtime < YOUNG_S
        if young and not _exists(LOCK, dfd):
            return 0
        lock = os.open(LOCK, os.O_RDWR | os.O_CREAT | _NOFOLLOW, 0o600, dir_fd=dfd)
    except OSError:
        return 0
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(lock)
        return 0  # owned: a live monitor or keeper
    try:
        left = False
        for log in LOGS:
            try:
                fd = os.open(log, os.O_WRONLY | os.O_NONBLOCK | _NOFOLLOW, dir_fd=dfd)
            except OSError:
                continue  # missing, or a link: never opened
            try:
                st = os.fstat(fd)
                if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
                    continue
                if _held({(st.st_dev, st.st_ino)}):  # a live job still writes there
                    os.ftruncate(fd, 0)  # emptied, kept
                    left = True
                else:
                    os.unlink(log, dir_fd=dfd)
                n += 1
            except OSError:
                pass
            finally:
                os.close(fd)
        if not left:
            for name in (*LOGS, LOCK):
                try:
                    os.unlink(name, dir_fd=dfd)  # a link is removed, never followed
                except OSError:
                    pass
            try:
                os.rmdir(d)
            except OSError:
                pass
    finally:
        os.close(lock)
    return n


def _exists(name: str, dfd: int) -> bool:
    try:
        os.lstat(name, dir_fd=dfd)
    except OSError:
        return False
    return True


if __name__ == "__main__":  # the keeper
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    keep(sys.argv[1], int(sys.argv[2]))
