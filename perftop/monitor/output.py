"""The job's stdout and stderr, when perftop stands between the job and its output: the
TUI owns the terminal, or ``--stream-out`` (ssh's pipes are our stdout and stderr).

The job writes to ordinary files (not pipes), so it never blocks on a slow reader and never
dies of a broken pipe if the monitor, its terminal or its ssh link goes away; a thread tails
the files into ``output`` events (the session, the recording, the stream) and may relay
them to a file descriptor, which it simply stops doing once that descriptor fails. What it
has read is punched out of the files, with space reserved ahead, and a keeper process takes
over if the monitor dies (see :mod:`perftop.monitor.outfiles`): their disk use stays small
however long the job writes.

The two files are read at each write (:mod:`perftop.monitor.outorder`), in the order the job
wrote them, so lines keep their order across stdout and stderr. A progress bar's unfinished
line (rewritten with carriage returns) is held as its last state, and ended as a line of
its own when another writer's text follows it (see :func:`_text_after_bar`; not where a
read may have ended inside a write, :func:`_cut_in_a_write`); a relay gets
the job's bytes as written.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from typing import IO

from perftop.events import Event, Output
from perftop.monitor import outfiles, outrate
from perftop.monitor.outorder import WriteOrder
from perftop.monitor.outpass import OutputPass

POLL_S = 0.1
# Asleep this long with nothing to send, mark or read, where inotify wakes the reader at
# each write: each wake-up of an idle thread costs ~0.3 ms of CPU (its caches are cold),
# and ten a second were a third of a percent of a core for a job printing a line a second.
IDLE_S = 2.0
MIN_GAP_S = 0.02  # between two reads (a job that never pauses: 50 reads a second)
MAX_LINE = 4096
PAGE = 4096  # a file's size grows by whole pages of a write (the kernel's page cache)
KEEPER_WAIT_S = 2.0


class OutputTail(OutputPass):
    def __init__(
        self,
        submit: Callable[..., None],
        directory: str | None = None,
        relay: Callable[[bytes], bool] | None = None,
    ) -> None:
        """``relay``: also pass each complete piece of output on (see
        :func:`~perftop.monitor.outpass.relay_to`)."""
        self.submit = submit
        self.relay = relay
        self.dir = tempfile.mkdtemp(prefix=outfiles.PREFIX, dir=directory)
        self._lock = outfiles.hold(self.dir)  # an owner lives: `perftop ls` leaves it alone
        self.paths = {name: os.path.join(self.dir, f"{name}.log") for name in ("stdout", "stderr")}
        self.stdout: IO[bytes] = open(self.paths["stdout"], "wb")  # noqa: SIM115
        self.stderr: IO[bytes] = open(self.paths["stderr"], "wb")  # noqa: SIM115
        self._readers = {name: open(p, "rb") for name, p in self.paths.items()}  # noqa: SIM115
        self._partial = {name: b"" for name in self.paths}
        self._cut = dict.fromkeys(self.paths, False)  # the last read may end inside a write
        mono = time.monotonic()
        self._buckets = {name: outrate.Bucket(mono) for name in self.paths}
        self._left = dict.fromkeys(self.paths, 0)  # bytes left out since the last marker
        self._marked = dict.fromkeys(self.paths, 0.0)
        self.left_out = 0  # bytes of output left out, in all
        # our own write ends, for fallocate (the job's may be closed here)
        self._wfds = {n: os.open(p, os.O_WRONLY | os.O_CLOEXEC) for n, p in self.paths.items()}
        self._punched = dict.fromkeys(self.paths, 0)
        self._reserved = dict.fromkeys(self.paths, 0)
        for name in self.paths:
            self._bound(name)
        self._keeper, self._lifeline = _start_keeper(self.dir)
        self._order = WriteOrder(self.paths)
        self._pending: list[Event] = []  # read, not yet sent (sent every POLL_S)
        self._sent = 0.0  # when they were last sent (monotonic)
        self._stop = threading.Event()
        self._paused = False
        self._show_partial = False
        self._thread = threading.Thread(target=self._loop, name="perftop-output", daemon=True)

    def show_partial(self) -> None:
        """At the next poll, pass on each stream's unfinished line as a line: a prompt
        (``input("overwrite? [y/N] ")``, pdb's ``(Pdb)``) ends with no newline, and the job
        waits on it: held back for its newline, it showed only once answered."""
        self._show_partial = True
        self._order.wake()

    def start(self) -> None:
        # The child has its own copies of the write ends now.
        self.stdout.close()
        self.stderr.close()
        if self._paused:  # after a pause: a new thread on the same files
            self._paused = False
            self._order.rearm()
            self._stop = threading.Event()
            self._thread = threading.Thread(target=self._loop, name="perftop-output", daemon=True)
        self._thread.start()

    def pause(self) -> None:
        """Stop tailing without closing anything (before the monitor forks)."""
        self._paused = True
        self._stop.set()
        self._order.wake()
        self._thread.join(timeout=2)

    def _loop(self) -> None:
        """Read at each write (see :mod:`perftop.monitor.outorder`), the streams in the
        order they were written, and when the TUI asks for a prompt; at least every
        ``POLL_S`` while a marker of left-out bytes is due or without inotify, else every
        ``IDLE_S``. What was read goes on as events every ``POLL_S``, in the order read."""
        while not self._stop.is_set():
            if self._pending:
                due = self._sent + POLL_S - time.monotonic()
            else:
                due = POLL_S if self._order.fd < 0 or any(self._left.values()) else IDLE_S
            order = self._order.wait(max(0.0, due))
            if self._stop.is_set():
                break
            if self.poll(order=order):
                time.sleep(MIN_GAP_S)
        if not self._paused:
            self.poll(final=True, order=self._order.wait(0))

    def poll(self, final: bool = False, order: list[str] | None = None) -> bool:
        """Read what is new, stream by stream: the last read's late writes first (as far as
        they went, ``WriteOrder.heads``), then those in ``order`` (written, in the order of
        their writes). Up to the sizes seen now: what is written while we read is read
        next time, in its order. Whether anything was read."""
        read = False
        events = self._pending
        now, mono = time.time(), time.monotonic()
        whole, self._show_partial = final or self._show_partial, False
        heads = self._order.heads()  # late writes of the last read: before anything since
        ends = self._sizes()
        order = self._order.settle(order or [], ends, self._sizes)
        # A late stream's first piece, then every stream (``order`` names them all): a
        # head is never its stream's last piece in this read, the rest always are.
        chunks = [(n, min(at, ends[n])) for n, at in heads.items()]
        chunks += [(n, ends[n]) for n in order]
        budget: dict[str, int] = {}  # bytes each stream may still give in this read
        for k, (name, end) in enumerate(chunks):
            f = self._readers[name]
            last = k >= len(heads)
            if name not in budget:  # the rate asked once, over all of the stream's pieces
                budget[name] = self._admit(name, f, mono, ends[name])
            new = f.read(max(0, min(budget[name], end - f.tell())))
            budget[name] -= len(new)
            read = read or bool(new)
            data = self._partial[name]
            cut = self._cut[name]  # the read before this one's data (kept over empty reads)
            if new:
                self._cut[name] = _cut_in_a_write(f, end)
            if new and not cut and _text_after_bar(data, new):
                # A line rewritten in place (a progress bar) that this write does not
                # rewrite or end: another writer's text. The bar's last state is a line
                # of its own, never one line with what the other wrote after it.
                self._emit(name, data, now, mono, events)
                data = b""
            data += new
            if data:
                head, sep, tail = data.rpartition(b"\n")
                head += sep  # whole lines, as written (an empty last one too)
                if whole and last:  # an unfinished line: after the stream's last piece
                    head, tail = data, b""
                if head:
                    self._emit(name, head, now, mono, events, end_line=final and last)
                # A bar's overwritten states are relayed after the head and dropped before
                # the length is judged: many updates read at once are still one line.
                tail = self._rewound(tail)
                if len(tail) > MAX_LINE:
                    self._emit(name, tail, now, mono, events)
                    tail = b""
                self._partial[name] = tail
            left = self._left[name] if last else 0
            if left and (final or mono - self._marked[name] >= outrate.MARK_EVERY_S):
                events.append(Output(now, name, outrate.marker(left)))
                self._left[name], self._marked[name] = 0, mono
        for name in self._readers:  # at each poll: a flood's skipped bytes are freed at once
            self._bound(name)
        if whole or mono - self._sent >= POLL_S:
            self._pending, self._sent = [], mono
            if events:
                self.submit(*events)
        return read

    def _sizes(self) -> dict[str, int]:
        return {name: os.fstat(f.fileno()).st_size for name, f in self._readers.items()}

    def _bound(self, name: str) -> None:
        """Punch out what was read; keep space reserved ahead of the job's writes."""
        fd = self._wfds[name]
        self._punched[name] = outfiles.punch(fd, self._punched[name], self._readers[name].tell())
        self._reserved[name] = outfiles.reserve(fd, os.fstat(fd).st_size, self._reserved[name])

    def stop(self) -> None:
        """The last output read; the files are then the keeper's, which removes them once
        no process of the job holds them (at once, usually)."""
        self._stop.set()
        self._order.wake()
        if self._thread.is_alive():
            self._thread.join(timeout=2)
        self._order.close()
        for f in self._readers.values():
            f.close()
        for fd in self._wfds.values():
            os.close(fd)
        os.close(self._lock)
        if self._keeper is None:
            outfiles.remove(self.dir)
            return
        os.close(self._lifeline)
        try:
            self._keeper.wait(timeout=KEEPER_WAIT_S)
        except subprocess.TimeoutExpired:
            pass  # the job's processes still write there: the keeper goes on alone


def _cut_in_a_write(f: IO[bytes], end: int) -> bool:
    """Whether the read that left ``f`` where it is may have ended inside one of the job's
    writes: short of the size taken (a read's bound), or at a page's end: a write to a file
    grows its size page by page as it copies (a bar's update that crosses a page was seen
    half written, and its second half read as another writer's text)."""
    pos = f.tell()
    return pos < end or pos % PAGE == 0


def _text_after_bar(partial: bytes, new: bytes) -> bool:
    """Whether ``new``, read after ``partial`` (a stream's unfinished line), is text that
    does not go on with it: ``partial`` is a progress bar's state (rewritten with a carriage
    return, not waiting for its next state after one), and ``new`` starts with a character
    that is printed, not a newline, carriage return, backspace or escape sequence (a bar
    rewrites itself with those: tqdm's ``\r``, Keras's ``\b…\r``, ``\x1b[2K``)."""
    if b"\r" not in partial or partial.endswith(b"\r"):
        return False
    return new[0] >= 0x20 and new[0] != 0x7F


def _start_keeper(directory: str) -> tuple[subprocess.Popen[bytes] | None, int]:
    """The keeper (see :mod:`perftop.monitor.outfiles`) and our end of its lifeline."""
    r, w = os.pipe()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-I", "-S", outfiles.__file__, directory, str(r)],
            pass_fds=(r,),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
    except OSError:
        os.close(w)
        proc = None
    os.close(r)
    return proc, w
