"""Plays a recording: one thread owns the player and turns commands into positions.

The app (or a test) calls the command methods from any thread; they only queue. The
player's thread applies them, advances while playing (event time runs ``speed`` times the
wall clock, or as fast as the model goes), and hands each new position to ``on_update``
with the snapshot, at most ``REFRESH_S`` apart while playing and at once after a command.
"""

from __future__ import annotations

import itertools
import queue
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from perftop.errors import PerftopError
from perftop.model import Snapshot
from perftop.replay.index import ReplayIndex
from perftop.replay.player import Player

SPEEDS = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0)
TICK_S = 0.05
REFRESH_S = 0.25
INDEX_REFRESH_S = 0.5
FAST_SLICE_S = 0.08  # wall time per tick spent applying events in "as fast as possible"
SEEKS = ("end", "event", "seconds", "step", "time", "jump")


@dataclass(frozen=True, slots=True)
class ReplayState:
    """Where a replay is, for the timeline and the status line."""

    playing: bool = False
    speed: float = 1.0
    fast: bool = False
    at_end: bool = False
    now_t: float | None = None
    start_t: float | None = None
    end_t: float | None = None  # of what the index has read so far
    event: int = 0
    events_total: int = 0
    step: int = 0
    steps_total: int = 0
    indexed: float = 0.0  # share of the file the index has read
    index_done: bool = False
    stalls: tuple[float, ...] = ()  # where slow steps ended
    stall_cost: tuple[float, ...] = ()  # their time beyond the median, summed up to each
    gaps: tuple[float, ...] = ()  # where intervals between steps began
    busy: str = ""  # what a command is waiting for ("indexing…")


def parse_target(text: str) -> tuple[str, float]:
    """``1200`` or ``#1200``: a step; ``90s``, ``1:30``, ``1:02:03``, ``+90s``: seconds
    since the session start. Raises ``ValueError`` with the accepted forms."""
    s = text.strip().lower().lstrip("+")
    if re.fullmatch(r"#?\d+", s):
        return "step", float(s.lstrip("#"))
    if m := re.fullmatch(r"(\d+(?:\.\d*)?)\s*(s|m|h)", s):
        return "time", float(m[1]) * {"s": 1, "m": 60, "h": 3600}[m[2]]
    if re.fullmatch(r"\d+(:\d{1,2}){1,2}(\.\d*)?", s):
        secs = 0.0
        for part in s.split(":"):
            secs = secs * 60 + float(part)
        return "time", secs
    raise ValueError(f"{text!r}: give a step (1200 or #1200) or a time (90s, 1:30, 2h)")


class ReplayController:
    """The app's handle on a replay (see :class:`perftop.tui.app.Controller`)."""

    def __init__(
        self,
        index: ReplayIndex,
        on_update: Callable[[Snapshot, ReplayState], None],
        on_notice: Callable[[str], object] = lambda _: None,
        *,
        playing: bool = True,
    ) -> None:
        self.index = index
        self.player = Player(index)  # RecordingError here, before any UI starts
        self.player.forward(1)  # the session start: then its first second, as live shows it
        self.player.advance_to((self.player.now or 0.0) + 1.0)
        self.on_update, self.on_notice = on_update, on_notice
        self.playing, self.speed, self.fast = playing, 1.0, False
        self._clock = self.player.now or 0.0
        self._q: queue.Queue[tuple[Any, ...]] = queue.Queue()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="perftop-replay", daemon=True)
        self._stalls: tuple[float, ...] = ()
        self._stall_cost: tuple[float, ...] = ()
        self._gaps: tuple[float, ...] = ()
        self._noticed = False
        self._pending: tuple[Any, ...] | None = None  # a seek waiting for the index

    # -- the Controller protocol -------------------------------------------------------------
    def running(self) -> bool:
        return False  # nothing to stop: quitting a replay just quits

    def toggle_recording(self) -> str | None:
        raise PerftopError("a replay is a recording already")

    def capture(self, steps: int, tell: Any) -> str:
        return "a replay cannot capture ops: captures come from a live job (t in perftop run)"

    # -- commands (any thread) ---------------------------------------------------------------
    def start(self) -> ReplayController:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._q.put(("noop",))
        if self._thread.is_alive():
            self._thread.join(2.0)
        self.player.close()

    def command(self, *cmd: Any) -> None:
        """``("play",)``, ``("speed", ±1)``, ``("fast",)``, ``("event", ±1)``,
        ``("seconds", ±1.0)``, ``("step", n)``, ``("time", s)``, ``("jump", kind)``,
        ``("end",)``."""
        self._q.put(cmd)

    # -- the player's thread -----------------------------------------------------------------
    def _loop(self) -> None:
        last_post, last_wall = 0.0, time.monotonic()
        self._post()
        while not self._stop.is_set():
            # paused with nothing left to read or say: asleep until a command (or stop's)
            idle = not self.playing and self._pending is None and self._noticed
            try:
                cmd: tuple[Any, ...] | None = self._q.get(timeout=None if idle else TICK_S)
            except queue.Empty:
                cmd = None
            if self._stop.is_set():
                return
            wall = time.monotonic()
            dt, last_wall = wall - last_wall, wall
            moved = False
            if cmd is None and self._pending is not None and self._covered(self._pending):
                cmd, self._pending = self._pending, None
            elif cmd is not None and cmd[0] in SEEKS and not self._covered(cmd):
                self._pending, cmd = cmd, None  # the index reads there first: then it is quick
                self._post()
                last_post = wall
            if cmd is not None:
                try:
                    self._handle(cmd)
                except Exception as exc:  # a bad recording part: a notice, not a crash
                    self.on_notice(f"replay: {type(exc).__name__}: {exc}")
                moved = True
            if self.playing and cmd is None:
                moved |= self._advance(dt)
            if self.index.done and not self._noticed:
                self._noticed = moved = True
                for w in self.index.warnings() + ([self.index.error] if self.index.error else []):
                    self.on_notice(w)
            elif not self.index.done and wall - last_post >= INDEX_REFRESH_S:
                moved = True  # the timeline grows while the index reads on
            if moved and (cmd is not None or not self.playing or wall - last_post >= REFRESH_S):
                self._post()
                last_post = wall

    def _covered(self, cmd: tuple[Any, ...]) -> bool:
        """Whether the index has read as far as a seek goes (jumps need it all)."""
        ix, p = self.index, self.player
        if ix.done:
            return True
        what = cmd[0]
        if what == "step":
            return ix.steps >= cmd[1]
        if what == "time":
            return (
                ix.end_t is not None and ix.start_t is not None and ix.end_t >= ix.start_t + cmd[1]
            )
        if what == "seconds":
            return ix.end_t is not None and ix.end_t >= (self.position() or 0.0) + cmd[1]
        if what == "event":
            return ix.events >= p.events + cmd[1]
        if what == "end":
            return False  # (the index has not read it all: its end is not known yet)
        return what != "jump" or bool(self._find(cmd[1]))

    def _advance(self, dt: float) -> bool:
        p = self.player
        if self.fast:
            n = p.advance_for(FAST_SLICE_S)
        else:
            self._clock += dt * self.speed
            n = p.advance_to(self._clock)
        if p.finished:
            self.playing = False
            return True
        return n > 0

    def position(self) -> float | None:
        """Where the replay is in time: its clock, which a time seek or the playback moves
        on through a gap with no event (a job's imports), else its last event's time."""
        now = self.player.now
        return self._within(self._clock) if now is None or self._clock > now else now

    def _handle(self, cmd: tuple[Any, ...]) -> None:
        p, what = self.player, cmd[0]
        clock: float | None = None  # a time seek's target: the clock goes there
        if what == "play":
            self.playing = not self.playing
            if self.playing and p.finished:
                self.on_notice("at the end of the recording")
                self.playing = False
        elif what == "speed":
            i = min(range(len(SPEEDS)), key=lambda k: abs(SPEEDS[k] - self.speed))
            self.speed = SPEEDS[max(0, min(len(SPEEDS) - 1, i + cmd[1]))]
            self.fast = False
        elif what == "fast":
            self.fast = not self.fast
        elif what == "event":
            p.seek_event(p.events + cmd[1])
        elif what == "seconds":
            # from the clock, not the last event: else no key moves past a gap longer than it
            clock = self._within((self.position() or 0.0) + cmd[1])
            p.seek_time(clock)
        elif what == "step":
            p.seek_step(int(cmd[1]))
        elif what == "time":
            clock = self._within((self.index.start_t or p.now or 0.0) + cmd[1])
            p.seek_time(clock)
        elif what == "jump":
            self._jump(cmd[1])
        elif what == "end" and self.index.end_t is not None:
            p.seek_time(self.index.end_t)
        self._clock = p.now or self._clock
        if clock is not None and self._clock < clock:  # in a gap: there, not at its start
            self._clock = clock

    def _within(self, t: float) -> float:
        """``t`` within the recording: not before its start, nor after its end once read."""
        ix = self.index
        t = max(t, ix.start_t) if ix.start_t is not None else t
        return min(t, ix.end_t) if ix.done and ix.end_t is not None else t

    def _find(self, kind: str) -> tuple[float, int] | None:
        find = {
            "stall": self.index.next_stall,
            "between": self.index.next_between,
            "hint": self.index.next_hint_change,
        }[kind]
        return find(self.player.now or 0.0)

    def _jump(self, kind: str) -> None:
        found = self._find(kind)
        if found is None:
            label = {
                "stall": "slow step",
                "between": "between-steps interval",
                "hint": "hint change",
            }
            more = "" if self.index.done else " yet (still indexing)"
            self.on_notice(f"no later {label[kind]}{more}")
            return
        self.player.seek_event(found[1])

    def state(self) -> ReplayState:
        ix, p = self.index, self.player
        if len(self._stalls) != len(ix.stalls):
            self._stalls = tuple(m[0] for m in ix.stalls)
            self._stall_cost = tuple(itertools.accumulate(m[3] for m in ix.stalls))
        if len(self._gaps) != len(ix.gaps) + len(ix.between_marks):
            self._gaps = tuple(sorted([m[0] for m in ix.gaps] + [m[0] for m in ix.between_marks]))
        return ReplayState(
            playing=self.playing,
            speed=self.speed,
            fast=self.fast,
            at_end=p.finished,
            now_t=self.position(),
            start_t=ix.start_t if ix.start_t is not None else p.session_start(),
            end_t=ix.end_t,
            event=p.events,
            events_total=ix.events,
            step=p.steps(),
            steps_total=ix.steps,
            indexed=ix.progress,
            index_done=ix.done,
            stalls=self._stalls,
            stall_cost=self._stall_cost,
            gaps=self._gaps,
            busy=_busy(self._pending, ix.progress),
        )

    def _post(self) -> None:
        self.on_update(self.player.snapshot(), self.state())


def _busy(pending: tuple[Any, ...] | None, progress: float) -> str:
    if pending is None:
        return ""
    what = f"step {int(pending[1]):,}" if pending[0] == "step" else "there"
    return f"indexing to {what}… {progress:.0%}"
