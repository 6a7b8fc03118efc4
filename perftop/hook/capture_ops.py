"""One running capture: the profiler started and stopped at step boundaries, then, on a
thread of its own, the summary (:class:`CaptureOps`) and the trace file.

Imported only once a capture was asked for (it runs torch's Kineto profiler). The phase of
an op comes from the profiler's own annotations, the way the hook times the phases: under
``autograd::engine::evaluate_function`` (the backward pass), ``Optimizer.step#``, or
``enumerate(DataLoader)#`` (a batch fetch); the rest of a captured step on the training
thread is forward, and an op of another thread, or in time cut out of the steps, is
``between``. Ops before the first or after the last captured step are left out (the step
the profiler starts in holds its start-up). The phase's seconds are the hook's own figures
for the captured steps (its data, backward and optimizer times, forward the rest, between
the time cut out of the steps), so an op runs inside the window its phase is timed by.
Each captured step is a ``ProfilerStep#N`` range in the trace: perftop's step track.
"""

from __future__ import annotations

import re
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from types import FrameType
from typing import Any

from perftop.events import CaptureAsk, CaptureOps, CaptureState
from perftop.hook.capture_cost import After
from perftop.hook.quiet import quiet_stderr
from perftop.hook.trace_file import trace_path, write_trace

TOP_OPS = 40
_FRAME = re.compile(r"^(.*)\((\d+)\): (.*)$")
_NOT_USER = ("torch/", "site-packages/", "dist-packages/", "perftop/", "<", "threading.py")
_MARKS = (
    ("autograd::engine::evaluate_function", "backward"),
    ("Optimizer.step#", "optimizer"),
    ("enumerate(DataLoader)#", "data"),
)
_SKIP = ("autograd::engine::", "Optimizer.", "enumerate(DataLoader)#", "ProfilerStep")


class Run:
    def __init__(
        self,
        state: Any,
        ask: CaptureAsk,
        steps: int,
        first: int,
        before: tuple[float, int, float],
    ):
        self.state, self.ask, self.steps, self.first, self.before = state, ask, steps, first, before
        self.prof: Any = None
        self.marker: Any = None  # the open step's ProfilerStep# range (the trace's step track)
        # The step the profiler starts in also holds its start-up (tens of ms): profiled,
        # but not one of the N steps summarized.
        self.warming = True
        # per captured step: (t0, t1) in perf_counter seconds and its phases' seconds
        self.spans: list[tuple[float, float]] = []
        self.phases: list[dict[str, float]] = []
        # The profiler names a frame ``file(line): function`` with the line it was at when
        # the frame was entered, or, for a frame already running when it started, the line
        # it was at then: no op's own line either way. Those running frames' names are
        # mapped to their function's first line here, so that every op's place is its
        # function (file, first line, name), the same however the capture began.
        self.running: dict[tuple[int, str], list[tuple[str, int]]] = {}
        self.after = After()  # the steps after it, while its summary is made

    def start(self) -> str:
        """Start the profiler; a one-line reason when it cannot."""
        try:
            import torch

            # The autograd profiler, as torch.profiler.profile runs it: that class's start
            # first probes ``torch._inductor``, which imports it (hundreds of modules,
            # seconds) into a job that never compiled.
            self.cuda = bool(torch.cuda.is_initialized())
            f: FrameType | None = sys._getframe(1)
            while f is not None:
                code = f.f_code
                where = (code.co_filename, code.co_firstlineno)
                self.running.setdefault((f.f_lineno, code.co_name), []).append(where)
                f = f.f_back
            self.prof = torch.autograd.profiler.profile(
                record_shapes=True,
                with_stack=True,
                use_kineto=True,
                use_device="cuda" if self.cuda else None,
            )
            with quiet_stderr():
                self.prof.__enter__()
            self.mark = torch.autograd.profiler.record_function
        except Exception as exc:
            self.prof = None
            return f"torch.profiler did not start: {exc!r}"[:200]
        return ""

    def boundary(self, index: int, t: float, tracker: Any) -> None:
        """Step ``index`` ended at ``t`` (read the tracker before it resets its figures)."""
        if self.warming:
            self.warming = False
            self._open(index + 1)
            return
        hole = max(float(tracker.hole), 0.0)  # time cut out of the step (outside training)
        t0 = tracker.start + hole
        dur = max(t - t0, 0.0)
        data = max(float(tracker.data), 0.0)
        bwd, opt = float(tracker.bwd), float(tracker.opt)
        fwd = max(dur - data - bwd - opt, 0.0)
        self.spans.append((t0, t))
        self.phases.append(
            {"data": data, "forward": fwd, "backward": bwd, "optimizer": opt, "between": hole}
        )
        self._close_marker()
        if not self.finished():
            self._open(index + 1)

    def _open(self, index: int) -> None:
        self.marker = self.mark(f"ProfilerStep#{index}")
        self.marker.__enter__()

    def _close_marker(self) -> None:
        marker, self.marker = self.marker, None
        if marker is not None:
            marker.__exit__(None, None, None)

    def finished(self) -> bool:
        return len(self.spans) >= self.steps

    def stop_and_summarize(self, done: Callable[[], None]) -> None:
        """Stop the profiler here (the training thread); the rest on a thread."""
        prof, self.prof = self.prof, None
        try:
            self._close_marker()
            with quiet_stderr():
                prof.__exit__(None, None, None)
        except Exception as exc:
            self._fail(f"torch.profiler did not stop: {exc!r}", done)
            return
        self.thread = threading.Thread(
            target=self._summarize, args=(prof, done), name="perftop-capture", daemon=True
        )
        self.thread.start()

    def abort(self) -> None:
        """Stop the profiler and drop what it holds (the process exits); a summary waiting
        for the steps after it waits no more."""
        self.after.end()
        prof, self.prof = self.prof, None
        for stop in (self._close_marker, lambda: prof.__exit__(None, None, None)):
            try:
                with quiet_stderr():
                    stop()
            except Exception:
                pass

    def _fail(self, reason: str, done: Callable[[], None]) -> None:
        self.after.built.set()  # nothing more to count after it
        s = self.state.sender
        s.put(
            CaptureState(time.time(), s.pid, self.ask.capture_id, "failed", reason[:200]),
            urgent=True,
        )
        done()

    def _summarize(self, prof: Any, done: Callable[[], None]) -> None:
        try:
            ops = self.summary(prof)
        except Exception as exc:
            self._fail(f"the capture's summary failed: {exc!r}", done)
            return
        finally:
            del prof
            self.after.built.set()
        ops = self.after.counted_in(ops)  # its cost on the training thread, after it
        s = self.state.sender
        s.put(
            CaptureState(
                time.time(), s.pid, self.ask.capture_id, "done", "", self.first, self.steps
            )
        )
        s.put(ops, urgent=True)
        done()

    def summary(self, prof: Any) -> CaptureOps:
        s = self.state.sender
        n = len(self.spans)
        events = prof.function_events  # parsed here, on this thread
        marks = [ev for ev in events if ev.name.startswith("ProfilerStep")]  # "ProfilerStep*"
        spans = [(ev.time_range.start, ev.time_range.end) for ev in marks]
        train = marks[0].thread if marks else None
        rows: dict[tuple[str, str], list[Any]] = {}
        device: dict[str, list[float]] = {}
        for ev in events:
            if _device(ev) or ev.name.startswith(_SKIP) or "::" not in ev.name:
                continue
            phase = phase_of(ev, spans, ev.thread == train)
            if phase is None:
                continue
            row = rows.get((ev.name, phase))
            if row is None:
                row = rows[(ev.name, phase)] = [0, 0.0, 0.0, Counter(), Counter()]
            row[0] += 1
            row[1] += ev.self_cpu_time_total
            dev = float(getattr(ev, "self_device_time_total", 0.0) or 0.0)
            row[2] += dev
            shapes = ", ".join(str(sh) for sh in (ev.input_shapes or ()) if sh)
            row[3][shapes] += 1
            row[4][user_frame(ev, self.running)] += 1
            if self.cuda:
                acc = device.setdefault(phase, [0.0, 0.0])
                for k in getattr(ev, "kernels", ()) or ():
                    memcpy = "memcpy" in k.name.lower() or "memset" in k.name.lower()
                    acc[1 if memcpy else 0] += k.duration
        out = []
        for (name, phase), (calls, cpu, dev, shapes, frames) in rows.items():
            file, line, func = frames.most_common(1)[0][0]
            out.append(
                (name, phase, calls / n, cpu / 1e6 / n, dev / 1e6 / n,
                 shapes.most_common(1)[0][0], file, line, func)
            )  # fmt: skip
        out.sort(key=lambda r: r[3] + r[4], reverse=True)
        phase_s = {p: sum(ph[p] for ph in self.phases) / n for p in self.phases[0]}
        dev_phases = {
            p: (k / 1e6 / n, m / 1e6 / n, max(phase_s.get(p, 0.0) - (k + m) / 1e6 / n, 0.0))
            for p, (k, m) in device.items()
        }
        trace, offset = self._write(prof)
        before, before_n, before_sd = self.before
        return CaptureOps(
            time.time(), s.pid, self.ask.capture_id, self.first, n,
            sum(b - a for a, b in self.spans) / n, before, phase_s,
            tuple(out[:TOP_OPS]), max(len(out) - TOP_OPS, 0),
            dev_phases if self.cuda else None, trace, offset, before_n,
            before_sd_s=before_sd,
        )  # fmt: skip

    def _write(self, prof: Any) -> tuple[str, float]:
        """The raw trace at ``{trace_prefix}{pid}.trace.json``; what maps its ``ts`` to
        epoch µs (Kineto writes ``baseTimeNanoseconds`` at its top and ``ts`` from it)."""
        path = trace_path(self.ask.trace_prefix, self.ask.capture_id, self.state.sender.pid)
        if path is None:  # none asked for, or not a name perftop gives
            return "", 0.0
        try:
            write_trace(prof.export_chrome_trace, path)
            with open(path, "rb") as f:
                head = f.read(4096)
        except Exception:
            return "", 0.0
        m = re.search(rb'"baseTimeNanoseconds":\s*(\d+)', head)
        return path, (int(m.group(1)) / 1000.0 if m else 0.0)


def _device(ev: Any) -> bool:
    kind = getattr(ev, "device_type", None)
    return kind is not None and getattr(kind, "name", "CPU") != "CPU"


def phase_of(ev: Any, spans: list[tuple[float, float]], train: bool) -> str | None:
    """An op's phase from its enclosing annotations, else whether a captured step holds it
    on the training thread (``spans`` in the events' own µs); None outside the capture's N
    steps (the step the profiler started in)."""
    start = ev.time_range.start
    if not spans or not spans[0][0] <= start <= spans[-1][1]:
        return None
    p = ev.cpu_parent
    while p is not None:
        for mark, phase in _MARKS:
            if p.name.startswith(mark):
                return phase
        p = p.cpu_parent
    if train and any(a <= start <= b for a, b in spans):
        return "forward"
    return "between"


def user_frame(
    ev: Any, running: dict[tuple[int, str], list[tuple[str, int]]]
) -> tuple[str, int, str]:
    """The nearest function of the job's own code that led to the op: its file, first line
    (see ``Run.running``; the profiler shortens a file's path by the import path it was
    found on, so a running frame is matched by its path's end) and name."""
    p = ev.cpu_parent
    while p is not None:
        m = _FRAME.match(p.name)
        if m and not any(x in m.group(1) for x in _NOT_USER) and "/lib/python" not in m.group(1):
            file, line, func = m.group(1), int(m.group(2)), m.group(3)
            for path, first in running.get((line, func), ()):
                if path == file or path.endswith("/" + file.lstrip("/")):
                    return path, first, func
            return file, line, func
        p = p.cpu_parent
    return "", 0, ""
