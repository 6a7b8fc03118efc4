"""The hook's process-wide state: one sender, one step tracker, and how to undo it all."""

from __future__ import annotations

import functools
import math
import os
import socket
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from perftop.events import (
    Between,
    BetweenOpen,
    CaptureAsk,
    Event,
    Hello,
    HookClose,
    TrainThread,
)
from perftop.hook import impl
from perftop.hook.sender import Sender, debug


def env_int(name: str, default: int | None = None, minimum: int | None = None) -> int | None:
    """The integer in ``$name``; ``default`` when unset or not an integer (a typo in a
    setting must not break training); at least ``minimum`` when given."""
    try:
        value = int(os.environ[name])
    except (KeyError, ValueError):
        return default
    return value if minimum is None else max(minimum, value)


def env_float(name: str, default: float, minimum: float = 0.0) -> float:
    """The number in ``$name`` (``0.5``, ``2``); ``default`` when unset, not a number or
    not finite; at least ``minimum``."""
    try:
        value = float(os.environ[name])
    except (KeyError, ValueError):
        return default
    return max(minimum, value) if math.isfinite(value) else default


# Where the training thread sends (solo), a pass's start goes out at once after a pass this
# long or longer, and at least this often (HookState.opened)
SHORT_PASS_S, OPEN_EVERY_S = 0.05, 1.0
# A Between's kind for the time in a library's report call (saves.REPORTS)
REPORT = "report"


class HookState:
    def __init__(self, socket_path: str) -> None:
        self.sender = Sender(socket_path, self.hello, on_event=self.heard)
        self.open_sent = -math.inf  # when a pass's start last went out at once (opened)
        self.last_pass_s = math.inf  # the last pass's length (checkpoints aside)
        # where the last report (Ray Train's: saves.REPORTS) began: an interval it opened
        # is a report, not a checkpoint (perf_counter; -inf: none)
        self.report_t0 = -math.inf
        self.comm: Any = None  # collectives.CommPoller, once torch is imported
        self.captures: Any = None  # capture.Captures, made when the first ask arrives
        self.capturing = False  # a capture is asked for or runs: the sync detector waits
        self.sync_exit: Callable[[], None] | None = None  # a final pass's syncs, at exit
        # A pass may have begun (a forward with grad off after a batch), or it was the
        # step's after all: the sync detector's watch of it on trial (sync_passes.PassWatch)
        self.pass_maybe: Callable[[], None] | None = None
        self.pass_refuted: Callable[[], None] | None = None
        # The last sync seen in a pass (watched): (perf_counter, the thread's CPU time, the
        # time it blocked, the training thread's voluntary switches then or -1), for where
        # the pass ends (pass_open.PassOpen.resumed)
        self.gap_sync: tuple[float, float, float, int] | None = None
        self.compiles: Any = None  # compile_watch.CompileWatch, once torch is patched
        # Steps go into the tracker's ring, which the sender reads (ring.py): in the
        # compiled build (impl.py) eight C stores a step, no Python object kept.
        self.tracker = impl.new_tracker(self.sender.steps.append)
        self.tracker.ring_cap = self.sender.capacity
        self.tracker.ring_off = self.sender.epoch_offset
        self.sender.ring = self.tracker
        self.tracker.on_settle = self.sender.start
        self.tracker.on_error = self.internal_error
        self.tracker.on_between = self.between
        self.tracker.on_open = self.opened
        # The sender's solo mode (solo.py): the tracker calls its pump at the step ending
        # at or after the next due time, which the sender tells it.
        self.tracker.on_flush = self.sender.pump
        self.sender.on_due = self.due
        self.sender.on_tick = self.tick
        self.trained_out = False  # the training thread ended: its steps all went out
        self.thread_said = 0  # the training thread's ident the monitor was last told of
        self.native_said = 0  # ... and its native id told (0: none, the main thread)
        self.handles: list[Any] = []  # torch hook handles (have .remove())
        self.undo: list[Callable[[], None]] = []
        self.errors: dict[str, int] = {}
        self.torch_patched = False
        self.armed: bool | None = None  # None: not asked yet; then whether a monitor answered
        # (pid, rank, world size) of the job's process group where the environment did not
        # say them (rank_watch.py); a forked child's Hello is its own
        self.place: tuple[int, int, int] | None = None
        os.register_at_fork(after_in_child=self.tracker.reset)
        os.register_at_fork(after_in_child=self.forked)

    def forked(self) -> None:
        """A forked child's training thread is its own, told afresh."""
        self.thread_said = self.native_said = 0

    def arm(self) -> bool:
        """Whether a monitor answers on the socket, asked once (a non-blocking connect).
        Until one has, the hook costs nothing: a leaked PERFTOP_SOCKET arms nothing."""
        if self.armed is None:
            try:
                self.armed = self.sender.probe()
            except Exception:
                self.armed = False
            if not self.armed:
                debug(f"no monitor answers on {self.sender.path}: the hook stays off")
        return self.armed

    def hello(self) -> Hello:
        torch = sys.modules.get("torch")
        device = "cpu"
        worker_id = threads = None
        try:
            if torch is not None and torch.cuda.is_initialized():
                device = "cuda"
            if torch is not None:
                threads = int(torch.get_num_threads())
                info = torch.utils.data.get_worker_info()
                worker_id = info.id if info is not None else None
        except Exception:
            pass
        rank, world = env_int("RANK"), env_int("WORLD_SIZE")
        if self.place is not None and self.place[0] == os.getpid():
            rank, world = self.place[1:]
        return Hello(
            t=time.time(),
            pid=os.getpid(),
            ppid=os.getppid(),
            host=socket.gethostname(),
            argv=tuple(sys.argv) if hasattr(sys, "argv") else (),
            rank=rank,
            local_rank=env_int("LOCAL_RANK"),
            world_size=world,
            torch_version=str(getattr(torch, "__version__", "")),
            device=device,
            worker_id=worker_id,
            closes=True,
            torch_threads=threads,
        )

    def heard(self, ev: Event) -> None:
        """An event the monitor sent (the sender's thread): a capture's ask."""
        if not isinstance(ev, CaptureAsk) or not self.torch_patched:
            return
        try:
            if self.captures is None:
                from perftop.hook.capture import Captures

                self.captures = Captures(self)
                if self.sender.inbox is not None:
                    self.sender.inbox.on_wake = self.captures.tick
            self.captures.ask(ev)
        except Exception:
            self.internal_error("op capture")

    def between(
        self, kind: str, t0: float, length: float, site: str = "", forward_s: float = -1.0
    ) -> None:
        """An interval outside training steps, from the tracker (perf_counter time): a pass
        a forward opened comes with its call site and its time inside forward calls."""
        s = self.sender
        r0 = self.report_t0
        if not kind.startswith("checkpoint"):
            self.last_pass_s = length
        elif kind != "checkpoint":
            if t0 == r0:
                return  # a report on another thread than training's: none of training's time
        elif t0 <= r0 < t0 + length:
            # A report ran in it (saves.REPORTS), from r0 to its end: the report's own
            # kind; the saves right before it (Ray's guide: the model saved to a folder,
            # then reported with it) are a checkpoint of their own.
            if r0 > t0:
                s.put(Between(s.pid, kind, t0 + s.epoch_offset, r0 - t0, site, forward_s))
            kind, t0, length = REPORT, r0, t0 + length - r0
        s.put(Between(s.pid, kind, t0 + s.epoch_offset, length, site, forward_s))

    def opened(self, kind: str, t0: float) -> None:
        """An interval outside training steps began (the tracker's ``on_open``): the
        monitor must know before it would call the running step stalled (2 s at least),
        and no step ends in the interval. Where the training thread sends (solo), a send
        now costs a pass ~0.1 ms (a DQN's 5,000 rollouts of 4 environment steps took 13%
        longer for it). So it goes at once for a checkpoint's saves, after a pass of
        ``SHORT_PASS_S`` or longer (or none yet), and at least once in ``OPEN_EVERY_S``;
        after a short pass (a rollout of a few environment steps), at the next send due,
        which a pass's forward calls make as step ends do (``first_forward``), or with
        the pass's end."""
        s = self.sender
        now = time.perf_counter()
        if kind == "checkpoint" and t0 == self.report_t0:
            kind = REPORT  # a report opened it (saves.REPORTS)
        urgent = (
            kind.startswith("checkpoint")
            or kind == REPORT
            or self.last_pass_s >= SHORT_PASS_S
            or now - self.open_sent >= OPEN_EVERY_S
        )
        if urgent:
            self.open_sent = now
        s.put(BetweenOpen(s.pid, kind, t0 + s.epoch_offset), urgent=urgent)

    def tick(self) -> None:
        """The sender thread's check, each interval: where the training thread has ended
        (a Ray Train worker's training function returned; the process lives on, idle),
        its last step ends where its last activity did and the hook's stream of steps
        ends (``HookClose``): the process idling from now on is no stalled step, and a
        kill later cuts nothing short."""
        tr = self.tracker
        if tr.thread != self.thread_said and tr.thread:
            self.say_thread(tr.thread)
        if self.trained_out or not tr.thread or tr.thread in sys._current_frames():
            return
        self.trained_out = True
        tr.flush()
        self.sender.put(HookClose(time.time(), self.sender.pid))

    def say_thread(self, ident: int) -> None:
        """The training thread is ``ident`` now (the sender thread's tick, once a change):
        the monitor is told its native id where it is not the main thread, or is again.
        Only the threading module knows a thread's native id from another thread; one it
        does not list (started outside it, never asked for its current thread) is not told."""
        self.thread_said = ident
        native = next((t.native_id for t in threading.enumerate() if t.ident == ident), None)
        pid = self.sender.pid
        if native is None or (native == pid and self.native_said in (0, pid)):
            return
        self.native_said = native
        self.sender.put(TrainThread(time.time(), pid, native), urgent=True)

    def due(self, t: float) -> None:
        """The sender's next send on the training thread (perf_counter; INF: none)."""
        self.tracker.flush_at = t

    def internal_error(self, where: str) -> None:
        """Count a perftop bug; tell the monitor once per place; never raise."""
        try:
            n = self.errors[where] = self.errors.get(where, 0) + 1
            if n == 1:
                exc = sys.exc_info()[1]
                debug(f"internal error in {where}: {exc!r}")
                self.sender.note("warning", f"perftop hook error in {where}: {exc!r}")
        except Exception:
            pass

    def wrap(self, owner: Any, name: str, make: Callable[[HookState, Any], Any]) -> None:
        """``owner.name`` (a module's function, a class's own method) replaced by
        ``make(self, it)``, undone with the hook; nothing where ``owner`` has no callable of
        that name of its own."""
        orig = owner.__dict__.get(name)
        if callable(orig):
            setattr(owner, name, make(self, orig))
            self.undo.append(functools.partial(setattr, owner, name, orig))

    def uninstall(self) -> None:
        for h in self.handles:
            h.remove()
        for fn in reversed(self.undo):
            fn()
        self.handles.clear()
        self.undo.clear()
        self.torch_patched = False
