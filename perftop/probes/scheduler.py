"""Runs the probes on a jitter-free schedule in one monitor thread.

Tick k is due at ``start + k * interval`` (not ``interval`` after the previous tick's work),
so sampling never drifts; how late each tick started and the CPU time it took are
recorded as a ``ProbeTick``. A tick that overran a whole interval skips the missed ticks
instead of bunching them up. New DataLoader workers wake the thread for an extra process
sample (``WorkerWatch``): workers that live shorter than an interval still get figures.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from perftop.errors import UsageError
from perftop.events import Event, Note, ProbeFailed, ProbeTick

MIN_INTERVAL_S = 0.2


class Probe(Protocol):
    def sample(self, t: float) -> list[Event]: ...


def check_interval(interval_s: float) -> float:
    """The interval, or a one-line UsageError the CLI prints without a traceback."""
    if not interval_s >= MIN_INTERVAL_S:  # also refuses NaN
        raise UsageError(
            f"--interval {interval_s:g} is too short: the minimum is {MIN_INTERVAL_S:g} s "
            "(sampling faster would cost the job more CPU than it tells you)"
        )
    return float(interval_s)


class ProbeSource:
    """A runner source: ``start()`` / ``stop()``, events go to ``submit``."""

    def __init__(
        self,
        submit: Callable[..., None],
        probes: Sequence[Probe],
        interval_s: float = 1.0,
    ) -> None:
        self.submit = submit
        self.probes = list(probes)
        self.interval_s = check_interval(interval_s)
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._failed: set[str] = set()  # failure kinds already noted
        self._failing: set[str] = set()  # probes whose last tick raised
        self.ticks = 0
        self.extra_samples = 0

    def start(self) -> ProbeSource:
        self._stop = threading.Event()
        self._wake.clear()
        self._thread = threading.Thread(target=self._loop, name="perftop-probes", daemon=True)
        self._thread.start()
        return self

    def wake(self) -> None:
        """Sample the processes now, between ticks (any thread; the probe thread samples)."""
        self._wake.set()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)
        for p in self.probes:
            close = getattr(p, "close", None)
            if close is not None:
                try:
                    close()
                except Exception:
                    pass

    def pause(self, timeout: float = 5.0) -> None:
        """Stop sampling, keeping the probes open; ``start()`` goes on (see lifecycle)."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _loop(self) -> None:
        start = time.monotonic()
        k = 0
        missed = 0
        while not self._stop.is_set():
            due = start + k * self.interval_s
            now = time.monotonic()
            while now < due and not self._stop.is_set():
                if self._wake.wait(due - now):
                    self._wake.clear()
                    if not self._stop.is_set():
                        self.sample_procs()
                now = time.monotonic()
            if self._stop.is_set():
                break
            self.tick(late_s=now - due, missed=missed)
            k += 1
            # skip ticks whose time already passed entirely
            behind = int((time.monotonic() - start) / self.interval_s) + 1 - k
            missed = max(0, behind)
            k += missed

    def tick(self, late_s: float = 0.0, missed: int = 0) -> list[Event]:
        """One sample of every probe, submitted as one batch; returns the events."""
        cpu0 = time.process_time()
        t = time.time()
        events: list[Event] = []
        for p in self.probes:
            name = getattr(p, "name", type(p).__name__)
            try:
                events += p.sample(t)
            except Exception as exc:  # a probe bug must not stop the others
                kind = f"{type(p).__name__}: {type(exc).__name__}"
                if kind not in self._failed:
                    self._failed.add(kind)
                    events.append(Note(t, "warning", "probe", f"{kind}: {exc}"))
                if name not in self._failing:  # its panel says it stopped, and why
                    self._failing.add(name)
                    events.append(ProbeFailed(t, name, f"{type(exc).__name__}: {exc}"))
            else:
                self._failing.discard(name)
        cpu = time.process_time() - cpu0
        events.append(
            ProbeTick(t, self.interval_s, round(max(0.0, late_s), 4), round(cpu, 5), missed)
        )
        self.ticks += 1
        self.submit(*events)
        return events

    def sample_procs(self) -> list[Event]:
        """The process probe alone, out of schedule: no ``ProbeTick`` (the tick figures
        stay those of the schedule); a failure is left for the next tick to report."""
        t = time.time()
        events: list[Event] = []
        for p in self.probes:  # (and the exit watch, on the processes just walked)
            if getattr(p, "name", "") in ("procs", "exits"):
                try:
                    events += p.sample(t)
                except Exception:
                    pass
        if events:
            self.extra_samples += 1
            self.submit(*events)
        return events


class WorkerWatch:
    """A snapshot subscriber that wakes the probes when the model learns of DataLoader
    workers (a ``LoaderInfo`` or a worker's hello) that the process probe has not sampled."""

    background_ok = True  # cheap, and figures still matter while the TUI is away

    def __init__(self, source: ProbeSource) -> None:
        self.source = source
        self.seen: set[int] = set()

    def __call__(self, snap: Any) -> None:
        pids = {pid for ld in snap.loaders for _, pid in ld.workers}
        pids |= {r.pid for r in snap.roles if r.role == "worker"}
        new = pids - self.seen
        if not new:
            return
        self.seen |= new
        if new - {p.pid for p in snap.processes}:
            self.source.wake()


class ThreadWatch:
    """A snapshot subscriber that gives the process probe each training process's training
    thread where its hook saw it train on another than the main thread (``Trainer.train_tid``:
    a Ray Train worker's training function runs on a thread of its own): its wait for a
    core is read there, not on a main thread that waits in a join or an event loop."""

    background_ok = True  # the figure goes on whether the TUI shows it or not

    def __init__(self, probe: Any) -> None:
        self.probe = probe

    def __call__(self, snap: Any) -> None:
        threads = snap.train_threads()
        if threads != self.probe.threads:
            self.probe.threads = threads  # a new dict: the probe's thread reads one or the other


def make_sources(interval_s: float = 1.0, nvml: Any | None = None, gpu: bool = True):
    """The runner source factory: ``Job(cfg, sources=[make_sources(cfg.interval_s)])``."""
    check_interval(interval_s)

    def make(job: Any) -> ProbeSource:
        from perftop.probes.exits import ExitProbe
        from perftop.probes.gpu import GpuProbe
        from perftop.probes.host import HostProbe
        from perftop.probes.procs import ProcProbe

        procs = ProcProbe(job.pid)
        probes: list[Probe] = [procs, ExitProbe(procs, job.hub.submit), HostProbe()]
        if gpu:
            probes.append(GpuProbe(nvml))
        src = ProbeSource(job.hub.submit, probes, interval_s)
        job.hub.snapshot_subscribers.append(WorkerWatch(src))
        job.hub.snapshot_subscribers.append(ThreadWatch(procs))
        return src

    return make
