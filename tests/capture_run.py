"""A real ``torch.profiler`` capture of a small MLP on CPU, for the tests of what perftop
makes of a capture: the raw trace file (``export_chrome_trace``), the steps perftop would
have recorded (measured here on the same clock) and a ``CaptureOps`` summary computed from
the trace the way a hook does (self time per op and step, phase by where the op ran).
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

import pytest

from perftop.events import CaptureOps, CaptureState, Step


def _forward(model, x):  # the user's line of the forward ops
    return model(x)


FORWARD_LINE = _forward.__code__.co_firstlineno + 1


@dataclass
class RealCapture:
    trace: Path
    clock_offset_us: float
    steps: list[Step]  # the captured steps
    before: list[Step]  # steps just before the capture
    ops: CaptureOps
    states: list[CaptureState]


def _phase_of(t: float, step: Step, marks: dict[int, tuple[float, float, float]]) -> str:
    fwd0, bwd0, opt0 = marks[step.index]
    if t < fwd0:
        return "data"
    if t < bwd0:
        return "forward"
    if t < opt0:
        return "backward"
    return "optimizer" if t <= step.t1 else "between"


def run_capture(
    tmp: Path, first_step: int = 41, n: int = 3, model=None, data=None, loss_fn=None, opt=None
) -> RealCapture:
    """Capture steps ``first_step`` .. ``+ n - 1`` of ``model`` trained on ``data`` (a list
    of batches) with ``loss_fn`` and ``opt``: by default a small MLP with SGD."""
    pid = os.getpid()  # the profiler's trace names the process by its pid
    import torch
    from torch.profiler import ProfilerActivity, profile

    torch.manual_seed(0)
    if model is None:
        model = torch.nn.Sequential(
            torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10)
        )
        data = [(torch.randn(64, 256), torch.randint(0, 10, (64,))) for _ in range(4)]
    loss_fn = loss_fn or torch.nn.functional.cross_entropy
    opt = opt or torch.optim.SGD(model.parameters(), lr=0.01)
    assert data
    marks: dict[int, tuple[float, float, float]] = {}

    def step(i: int) -> Step:
        t0 = time.time()
        x, y = data[i % len(data)]
        x = x.clone()
        fwd0 = time.time()
        loss = loss_fn(_forward(model, x), y)
        bwd0 = time.time()
        opt.zero_grad()
        loss.backward()
        opt0 = time.time()
        opt.step()
        t1 = time.time()
        marks[i] = (fwd0, bwd0, opt0)
        return Step(pid, i, t0, t1, fwd0 - t0, opt0 - bwd0, t1 - opt0, None, "optimizer")

    for i in range(first_step - 8, first_step - 3):
        step(i)  # warm-up (the first steps set up kernels: no fair "before")
    before = [step(i) for i in range(first_step - 3, first_step)]
    t_asked = time.time()
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        captured = [step(i) for i in range(first_step, first_step + n)]
    trace = tmp / f"capture-{pid}.trace.json"
    prof.export_chrome_trace(str(trace))
    doc = json.loads(trace.read_text())
    offset = doc["baseTimeNanoseconds"] / 1000.0

    # self time per op: its duration less its children's, on the same thread
    cpu = sorted(
        (e for e in doc["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "cpu_op"),
        key=lambda e: (e["tid"], e["ts"], -e["dur"]),
    )
    self_us: dict[int, float] = {}
    stack: list[dict] = []
    for e in cpu:
        while stack and (
            stack[-1]["tid"] != e["tid"] or stack[-1]["ts"] + stack[-1]["dur"] <= e["ts"]
        ):
            stack.pop()
        if stack:
            self_us[id(stack[-1])] -= e["dur"]
        self_us[id(e)] = e["dur"]
        stack.append(e)
    by_step = {s.index: s for s in captured}
    rows: dict[tuple[str, str], list] = defaultdict(lambda: [0, 0.0, Counter()])
    for e in cpu:
        t = (e["ts"] + offset) / 1e6
        s = next((s for s in captured if s.t0 <= t <= s.t1), None)
        if s is None:
            continue
        phase = _phase_of(t, by_step[s.index], marks)
        row = rows[(e["name"], phase)]
        row[0] += 1
        row[1] += self_us[id(e)] / 1e6
        dims = [d for d in e.get("args", {}).get("Input Dims", []) if d]
        row[2][", ".join(str(d) for d in dims)] += 1
    ops = sorted(
        (
            (
                name,
                phase,
                calls / n,
                self_s / n,
                0.0,
                shapes.most_common(1)[0][0] if shapes else "",
                __file__ if phase == "forward" else "",
                FORWARD_LINE if phase == "forward" else 0,
                "_forward" if phase == "forward" else "",
            )
            for (name, phase), (calls, self_s, shapes) in rows.items()
        ),
        key=lambda r: -r[3],
    )
    phase_s = {
        "data": sum(s.data for s in captured) / n,
        "forward": sum(s.other for s in captured) / n,
        "backward": sum(s.backward for s in captured) / n,
        "optimizer": sum(s.optimizer for s in captured) / n,
        "between": 0.0,
    }
    mean = sum(s.duration for s in captured) / n
    from perftop.hook.capture_cost import baseline  # the hook's own figure

    mean2 = sum(s.duration for s in before[-2:]) / 2
    before_s, before_n, before_sd = baseline(
        [(s.index, s.duration) for s in before], first_step, mean2
    )
    cid = "c1"
    states = [
        CaptureState(t_asked, 0, cid, "asked", steps=n),
        CaptureState(captured[0].t0, pid, cid, "started", first_step=first_step, steps=n),
        CaptureState(captured[-1].t1, pid, cid, "done", first_step=first_step, steps=n),
    ]
    summary = CaptureOps(
        captured[-1].t1 + 0.01,
        pid,
        cid,
        first_step,
        n,
        mean,
        before_s,
        phase_s,
        tuple(ops[:20]),
        max(0, len(ops) - 20),
        None,
        str(trace),
        offset,
        before_n,
        before_sd_s=before_sd,
    )
    return RealCapture(trace, offset, captured, before, summary, states)


@pytest.fixture(scope="session")
def real_capture(tmp_path_factory: pytest.TempPathFactory) -> RealCapture:
    """One real capture for the whole test session (its files are read-only to tests:
    a test that rewrites the trace copies it first)."""
    return run_capture(tmp_path_factory.mktemp("capture"))
