"""On-demand op capture (issue 31), the job and control side: `perftop trace` on a real
CPU training under `perftop run --headless`, its refusals, and the control connection.

One real run per job kind, shared through module fixtures: a plain MLP captured (its
summary, the trace file, the recording, the job's output), a job inside its own profiler
and a job that recompiles every step (both refused), and one that nobody asks (no capture
code loaded, no profiler on)."""

from __future__ import annotations

import bisect
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

from perftop.events import CaptureAsk, CaptureOps, CaptureState, Step, SyncBatch
from perftop.fmt import seconds as fmt_seconds
from perftop.monitor.registry import find_session
from perftop.recording import read_events
from perftop.wire import encode_frame
from tests.helpers import WORKLOADS, default_sigint, perftop, send_as_nobody

JOB = WORKLOADS / "capture_mlp.py"
CLOCK = 0.001  # Kineto's clock against time.time(), once its base time is added


def _start(tmp: Path, mode: str, name: str = "", **env: str) -> dict[str, Any]:
    """`perftop run --headless --record NAME.perftop` the MLP in ``mode``, trained."""
    name = name or mode
    gate, rec = tmp / f"gate-{name}", tmp / f"{name}.perftop"
    mon = subprocess.Popen(
        [sys.executable, "-m", "perftop", "run", "--headless", "--record", str(rec), "--",
         sys.executable, str(JOB), mode, str(gate)],
        cwd=tmp, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        stdin=subprocess.DEVNULL, preexec_fn=default_sigint, env={**os.environ, **env},
    )  # fmt: skip
    assert mon.stdout is not None and mon.stdout.readline().strip() == "ready"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # the hook has said hello: its steps are counted
        info = find_session(str(mon.pid))
        if info is not None and info.get("steps", 0) > 0:
            break
        time.sleep(0.1)
    return {"mon": mon, "gate": gate, "rec": rec, "trace": None}


def _steps_more(got: dict[str, Any], n: int) -> None:
    """Waits (at most 60 s) until the job has made ``n`` more steps than now."""

    def steps() -> int:
        info = find_session(str(got["mon"].pid))
        return int(info.get("steps", 0)) if info else 0

    want, deadline = steps() + n, time.monotonic() + 60
    while steps() < want and time.monotonic() < deadline:
        time.sleep(0.1)


def _finish(got: dict[str, Any]) -> dict[str, Any]:
    """Let the job end; what it said."""
    got["gate"].touch()
    out, err = got["mon"].communicate(timeout=180)
    got.update(out="ready\n" + out, err=err)
    return got


def _trace(tmp: Path, got: dict[str, Any], *args: str) -> None:
    """`perftop trace` of the session, by its monitor's pid."""
    got["trace"] = perftop("trace", str(got["mon"].pid), *args, cwd=tmp, timeout=180)


@pytest.fixture(scope="module")
def tmp() -> Any:
    with tempfile.TemporaryDirectory(prefix="perftop-capture-") as d:
        yield Path(d)


@pytest.fixture(scope="module")
def captured(tmp: Path) -> dict[str, Any]:
    got = _start(tmp, "plain", PERFTOP_SYNC="all")  # every step watched, but the captured
    _trace(tmp, got, "--steps", "3", "--out", str(tmp / "copy.json"))
    _steps_more(got, 15)  # watched again after the capture: steps to see it in
    _finish(got)
    events = list(read_events(got["rec"]))
    got["ops"] = [e for e in events if isinstance(e, CaptureOps)]
    got["states"] = [e for e in events if isinstance(e, CaptureState)]
    got["steps"] = {e.index: e for e in events if isinstance(e, Step)}
    got["watched"] = {e.step for e in events if isinstance(e, SyncBatch) and e.sampled}
    return got


def test_trace_prints_the_top_ops_and_the_capture_is_recorded(captured):
    t = captured["trace"]
    assert t.returncode == 0, t.stderr
    assert "steps" in t.stderr and "captured" in t.stderr and "trace:" in t.stderr
    assert [s.state for s in captured["states"]] == ["asked", "started", "done"]
    (cap,) = captured["ops"]
    assert cap.steps == 3 and cap.step_s > 0 and cap.before_s > 0
    fwd = [r for r in cap.ops if r[1] == "forward"]
    # heaviest first (self time); the matmul near the top: a preemption inside another
    # op's own dispatch on a loaded host puts that op above it (CI: aten::copy_, 1.7 ms)
    assert [r[3] for r in fwd] == sorted((r[3] for r in fwd), reverse=True)
    mm = next(r for r in fwd[:3] if r[0] in ("aten::addmm", "aten::mm"))
    assert mm[2] == 3.0  # three Linear layers a step
    assert "[64, 256]" in next(r[5] for r in fwd if r[0] == "aten::addmm")
    assert any(r[6].endswith("capture_mlp.py") for r in cap.ops)  # the user's own file
    # Its place is the user's function at its first line (the loop runs at module level:
    # line 1), never the line the loop was at when the capture began (the update's).
    addmm = next(r for r in fwd if r[0] == "aten::addmm")
    assert addmm[6] == str(JOB) and addmm[7:9] == (1, "<module>"), addmm
    assert {r[1] for r in cap.ops} >= {"forward", "backward", "optimizer"}


def test_the_cost_is_against_the_median_of_the_steps_sent_before_it(captured):
    """One figure for the capture's cost: the hook's median of the last steps it had sent
    when the capture began (up to 20), exactly those recorded steps' median."""
    (cap,) = captured["ops"]
    steps = captured["steps"]
    assert 3 <= cap.before_n <= 20 and cap.before_s > 0
    ends = range(cap.first_step - 1, cap.first_step - 40, -1)
    medians = {
        statistics.median(steps[i].t1 - steps[i].t0 for i in range(e - cap.before_n + 1, e + 1))
        for e in ends
        if all(i in steps for i in range(e - cap.before_n + 1, e + 1))
    }
    assert cap.before_s in medians
    assert f"on {cap.before_n} steps before" in captured["trace"].stderr


def test_the_steps_after_a_capture_while_its_summary_is_made_are_in_its_cost(captured):
    """The summary and the trace are made on a thread of the job's, which shares the
    interpreter with the training: the steps after the capture, to the one they were done
    in, were slower (timm: 6.8, 16.5, 8.1 s against 3.9 s) and counted nowhere."""
    (cap,) = captured["ops"]
    steps = captured["steps"]
    last = cap.first_step + cap.steps - 1
    after = [steps[i].t1 - steps[i].t0 for i in range(last + 1, last + 1 + cap.after_n)]
    assert cap.after_n >= 1 and len(after) == cap.after_n
    assert cap.after_s == pytest.approx(sum(after) - len(after) * cap.before_s, abs=1e-6)
    assert cap.after_s > 0  # the summary's thread slowed them: measured, not assumed
    # They end with the step in which the summary was done (its event's time).
    assert steps[last + cap.after_n].t1 >= cap.t - 0.05
    assert cap.after_n == 1 or steps[last + cap.after_n - 1].t1 <= cap.t + 0.05
    cost = cap.step_s - cap.before_s + cap.after_s / cap.steps
    assert f"in the {cap.after_n} steps after it" in captured["trace"].stderr or (
        cap.after_n == 1 and "in the step after it" in captured["trace"].stderr
    )
    sign = "+" if cost >= 0 else "-"
    assert f"cost {sign}{fmt_seconds(abs(cost))}/step" in captured["trace"].stderr


def test_the_sync_detector_steps_aside_during_a_capture(captured):
    (cap,) = captured["ops"]
    last = cap.first_step + cap.steps - 1
    watched = captured["watched"]
    assert {cap.first_step - 10, last + 10} <= watched  # PERFTOP_SYNC=all: before and after
    assert not watched & set(range(cap.first_step - 1, last + 1)), sorted(watched)


def test_op_self_times_of_a_phase_fit_in_the_phase(captured):
    (cap,) = captured["ops"]
    for phase, seconds in cap.phase_s.items():
        ops = sum(r[3] + r[4] for r in cap.ops if r[1] == phase)
        assert ops <= seconds + 1e-9, (phase, ops, seconds)
    assert cap.phase_s["forward"] > 0 and cap.phase_s["backward"] > 0


def test_the_trace_is_json_with_the_ops_on_the_steps_clock(captured, tmp):
    (cap,) = captured["ops"]
    assert Path(cap.trace).name.startswith("plain.perftop.capture-")
    trace = json.loads((tmp / "copy.json").read_text())
    assert trace == json.loads(Path(cap.trace).read_text())
    events = [e for e in trace["traceEvents"] if e.get("ph") == "X"]
    assert any(e["name"] == "aten::addmm" for e in events)
    marks = {e["name"]: e for e in events if e["name"].startswith("ProfilerStep#")}
    assert len(marks) == 3
    # Each captured step's t0/t1 (the hook's clock, epoch seconds) lines up with the
    # trace's own step range once clock_offset_us is added. The range is opened and closed at
    # step boundaries, inside opt.step() (its post-hook), just after the hook read the step's
    # end: it ends after the step does and before that opt.step() returned to the job (the
    # job's own clock); it begins after the previous step ended and before the previous
    # opt.step() returned. CLOCK: what the trace's clock may differ from time.time() by.
    returned = json.loads(Path(str(captured["gate"]) + ".own").read_text())
    for i in range(cap.first_step, cap.first_step + cap.steps):
        step, mark = captured["steps"][i], marks[f"ProfilerStep#{i}"]
        t0 = (mark["ts"] + cap.clock_offset_us) / 1e6
        t1 = t0 + mark["dur"] / 1e6
        back = bisect.bisect_left(returned, step.t1)  # the job's opt.step() that held t1
        assert 0 < back < len(returned), (step.t1, returned[:2], returned[-2:])
        assert step.t0 - CLOCK <= t0 <= returned[back - 1] + CLOCK, (t0, step, returned[back - 1])
        assert step.t1 - CLOCK <= t1 <= returned[back] + CLOCK, (t1, step, returned[back])
        inside = [e for e in events if e["name"] == "aten::addmm" and e.get("tid") == mark["tid"]]
        assert any(
            mark["ts"] <= e["ts"] and e["ts"] + e["dur"] <= mark["ts"] + mark["dur"] for e in inside
        )


@pytest.fixture(scope="module")
def idle(tmp: Path) -> dict[str, Any]:
    """The same job under perftop, nobody asking for a capture."""
    return _finish(_start(tmp, "idle"))


@pytest.fixture(scope="module")
def cut(tmp: Path) -> dict[str, Any]:
    """A job that ends in the middle of a 50-step capture."""
    got = _start(tmp, "plain", "cut")
    trace = subprocess.Popen(
        [sys.executable, "-m", "perftop", "trace", str(got["mon"].pid), "--steps", "50"],
        cwd=tmp, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert trace.stderr is not None and "capturing" in trace.stderr.readline()
    assert "capture started" in trace.stderr.readline()
    _finish(got)  # the job stops at step 55 at the latest: before 50 captured steps
    got["trace_rc"], got["trace_err"] = trace.wait(120), trace.stderr.read()
    return got


def test_a_job_that_exits_during_a_capture_exits_as_it_would(cut, idle):
    assert cut["mon"].returncode == 7 and cut["out"] == idle["out"]
    assert "Segmentation" not in cut["err"] and "PythonTracer" not in cut["err"]
    assert cut["trace_rc"] == 1 and "exited during the capture" in cut["trace_err"], cut[
        "trace_err"
    ]


def _recorded_steps(got: dict[str, Any]) -> tuple[int, int]:
    said = next(ln for ln in got["err"].splitlines() if ln.startswith("steps:"))
    steps = {e.index for e in read_events(got["rec"]) if isinstance(e, Step)}
    return len(steps), int(said.split()[1])


def test_every_step_reaches_the_recording_with_or_without_a_capture(idle, captured):
    """The hook's read of the monitor's frames never holds the sender (a recv that
    waited for the socket's timeout lost the last steps at exit)."""
    for got in (idle, captured):
        recorded, ran = _recorded_steps(got)
        assert recorded == ran, (recorded, ran)


def test_nobody_asking_loads_no_capture_code(idle):
    assert idle["mon"].returncode == 7
    assert "capture modules: [] profiler on: False" in idle["err"]


def test_a_capture_leaves_the_job_output_and_exit_code_as_they_were(captured, idle):
    assert len(captured["ops"]) == 1  # the capture did happen
    assert captured["mon"].returncode == idle["mon"].returncode == 7
    assert captured["out"] == idle["out"]
    assert "USDT" not in captured["err"] and "profiler_st" not in captured["err"]


@pytest.fixture(scope="module")
def refused(tmp: Path) -> dict[str, Any]:
    # one job at a time: the recompiling one compiles at every step until it may end
    out = {}
    for mode in ("own_profiler", "recompile"):
        got = _start(tmp, mode)
        _trace(tmp, got, "--steps", "2")
        out[mode] = _finish(got)
    return out


@pytest.mark.parametrize(
    ("mode", "why"),
    [("own_profiler", "profiler of its own"), ("recompile", "torch.compile compiled")],
)
def test_a_capture_is_refused_in_one_line(refused, mode, why):
    got = refused[mode]
    t = got["trace"]
    assert t.returncode == 1
    lines = [ln for ln in t.stderr.splitlines() if "error" in ln]
    assert len(lines) == 1 and why in lines[0] and "refused" in lines[0], t.stderr
    assert "Traceback" not in t.stderr
    assert got["mon"].returncode == 7


def test_trace_of_a_dead_pid_or_a_foreign_socket_is_one_line(tmp):
    import socket

    dead = perftop("trace", "999999", cwd=tmp)
    other = tmp / "other.sock"
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(other))
    s.listen(1)
    try:
        foreign = perftop("trace", str(other), cwd=tmp)
    finally:
        s.close()
    for got, says in ((dead, "not in a perftop session"), (foreign, "no perftop session")):
        assert got.returncode == 4 and len(got.stderr.strip().splitlines()) == 1, got.stderr
        assert says in got.stderr and "Traceback" not in got.stderr


def test_a_control_connection_gets_its_capture_refused_without_hooks(tmp):
    """The server's CTRL greeting reaches the hub, which answers at once with no hook."""
    from perftop.monitor.capture import request, serve_control
    from perftop.monitor.hub import Hub
    from perftop.monitor.server import Server

    hub = Hub().start()
    srv = Server(hub.submit_frame, tmp / "c.sock", on_control=lambda c, r: serve_control(hub, c, r))
    srv.start()
    try:
        got: list[Any] = []
        request(str(srv.path), 2, "trace", got.append, 20)
    finally:
        srv.close()
        hub.stop()
    (state,) = got
    assert isinstance(state, CaptureState) and state.state == "refused" and state.pid == 0
    assert "no training process" in state.reason


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to connect as another user")
def test_another_user_cannot_ask_for_a_capture(tmp):
    from perftop.monitor.server import CTRL_MAGIC, Server

    asked: list[Any] = []
    d = Path(tempfile.mkdtemp(prefix="perftop-peer-"))
    os.chmod(d, 0o755)
    srv = Server(lambda f, e: None, d / "s.sock", on_control=lambda c, r: asked.append(r))
    srv.start()
    try:
        os.chmod(srv.path, 0o666)  # as if the directory and socket modes had been loosened
        send_as_nobody(srv.path, CTRL_MAGIC + encode_frame([CaptureAsk(1.0, "", 3)]))
        assert srv.refused_peers == 1 and asked == []
    finally:
        srv.close()
        d.rmdir()


def test_an_ask_goes_to_the_trainers_hooks_never_to_dataloader_workers(tmp):
    """Real hook-like connections: the server sorts them by their hello."""
    import socket

    from perftop.events import Hello
    from perftop.monitor.server import Server
    from perftop.wire import MAGIC
    from perftop.wire_stream import EventReader

    srv = Server(lambda f, e: None, tmp / "w.sock").start()
    conns = {}
    try:
        for name, worker in (("trainer", None), ("worker", 0)):
            c = socket.socket(socket.AF_UNIX)
            c.connect(str(srv.path))
            hello = Hello(1.0, 100 if worker is None else 101, 1, "h", (), worker_id=worker)
            c.sendall(MAGIC + encode_frame([hello]))
            conns[name] = c
        deadline = time.monotonic() + 20
        while len(srv._hello) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        ask = CaptureAsk(2.0, "abc", 3, "/x/capture-abc-", "trace")
        assert srv.send_to_trainers(encode_frame([ask])) == [100]
        conns["trainer"].settimeout(10)
        reader = EventReader()
        reader.feed(MAGIC)
        (frame,) = reader.feed(conns["trainer"].recv(65536))
        assert frame[1] == [ask]
        conns["worker"].setblocking(False)
        with pytest.raises(BlockingIOError):
            conns["worker"].recv(1)
    finally:
        for c in conns.values():
            c.close()
        srv.close()
