"""Stall capture in a real training, a recording started and stopped mid-run, and a job
left running whose session stays attachable and recording."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import replace

import pytest

from perftop.events import ProcSample, Step, TrainThread
from perftop.events.probes import proc_row
from perftop.model import Session
from perftop.model.snapshot import StallRow
from perftop.monitor.jobenv import RunConfig
from perftop.monitor.runner import Job
from perftop.monitor.stall import StallWatch
from perftop.probes import make_sources
from perftop.probes.alive import alive
from perftop.recording import read_events
from perftop.report.build import build_report, session_from_file
from tests.helpers import WORKLOADS, perftop, run_and_report


@pytest.mark.parametrize("where", ["main", "thread"])
def test_a_stalled_step_shows_the_slow_function_and_the_workers(tmp_path, where):
    """On the main thread, and on a thread of its own while the main thread waits in a join
    (a Ray Train worker's shape): the stall's stacks are the training thread's, and so is
    the job's wait for a core (it read the main thread's join and its imports)."""
    args = ("30", "12", "3.5") + (("thread",) if where == "thread" else ())
    proc, rep = run_and_report(tmp_path, sys.executable, str(WORKLOADS / "stall_train.py"), *args)
    assert proc.returncode == 0, proc.stderr
    if where == "thread":
        _waits_are_the_training_threads(tmp_path / "r.perftop", proc.stdout)
    # Once per stall. (A loaded machine may also catch the wind-down after the last
    # step, DataLoader shutdown and interpreter exit, as a later "stall": not step 12.)
    ours = [s for s in rep["stalls"] if s["step"] == 12]
    assert len(ours) == 1 and rep["stalls"][0] is ours[0]
    s = ours[0]
    assert s["step"] == 12 and 2.0 <= s["stalled_s"] < 3.5 and s["median_s"] < 0.2
    by_role = {}
    for p in s["processes"]:
        by_role.setdefault(p["role"], []).append(p)
    main = by_role["main"][0]
    assert main["frames"][0]["function"] == "save_checkpoint_slowly"
    assert main["frames"][0]["file"].endswith("stall_train.py")
    assert len(by_role["worker"]) == 2  # the workers' frames too
    assert all(any(f["function"] == "_worker_loop" for f in w["frames"]) for w in by_role["worker"])
    text = perftop("report", str(tmp_path / "r.perftop"), cwd=tmp_path).stdout
    assert "stall_train.py:30 save_checkpoint_slowly" in text
    # a hint names it (3.5 s of a run of a few seconds), the step's own time and its place
    (hint,) = [h for h in rep["hints"] if h["id"] == "stalled-step"]
    assert hint["title"].startswith("Stalled steps: step 13 took "), hint
    assert any(e.startswith("main (pid ") and "save_checkpoint_slowly" in e
               for e in hint["evidence"]), hint  # fmt: skip


def _waits_are_the_training_threads(rec, out: str) -> None:
    """The hook named the training thread; the process probe read that thread's counter
    from then on (never more than the job's own last read of it, never going back)."""
    said = dict(line.split() for line in out.splitlines() if line.startswith("train_"))
    tid, final = int(said["train_tid"]), float(said["train_wait"])
    events = list(read_events(rec))
    told = [e for e in events if isinstance(e, TrainThread)]
    assert [e.tid for e in told] == [tid], told
    pid = told[0].pid
    rows = [r for e in events if isinstance(e, ProcSample) for r in map(proc_row, e.rows)
            if r is not None and r["pid"] == pid]  # fmt: skip
    # (none once the thread ended: the process lives on, its main thread's is not read)
    waits = [w for r in rows if r["wait_tid"] == tid and (w := r["cpu_wait_s"]) is not None]
    assert len(waits) >= 3, rows
    assert waits == sorted(waits) and waits[-1] <= final + 1e-3, (waits, final)


def test_stall_watch_fires_once_per_stall_and_only_past_both_thresholds():
    s = Session()
    for i in range(10):
        s.apply(Step(os.getpid(), i, 100.0 + i * 0.1, 100.0 + i * 0.1 + 0.1))
    last_t1 = 100.0 + 9 * 0.1 + 0.1
    got = []
    w = StallWatch(os.getpid(), lambda *evs: got.extend(evs))
    w(s.snapshot(now=last_t1 + 1.9))  # 19x the median but under 2 s: not a stall
    w(s.snapshot(now=last_t1 + 2.2))
    w(s.snapshot(now=last_t1 + 3.0))  # the same stall: not again
    deadline = time.time() + 20
    while not got and time.time() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)
    assert len(got) == 1 and got[0].step == 10
    frames = dict((pid, f) for pid, _role, f in got[0].stacks)
    assert any(f[0] == "test_stall_watch_fires_once_per_stall_and_only_past_both_thresholds"
               for f in frames[os.getpid()])  # fmt: skip


def test_recording_toggled_mid_run_reports_on_its_own(tmp_path):
    cfg = RunConfig((sys.executable, str(WORKLOADS / "slow_steps.py")), capture_output=True)
    job = Job(cfg, sources=[make_sources(0.5)]).start()
    try:
        deadline = time.time() + 30
        while time.time() < deadline and (
            job.hub.latest is None or job.hub.latest.steps.count < 30
        ):
            time.sleep(0.1)
        before = job.hub.latest.steps.count if job.hub.latest is not None else 0
        assert before >= 30
        path = job.toggle_recording(tmp_path / "mid.perftop")
        time.sleep(1.0)
        assert job.toggle_recording() is None  # stopped
        time.sleep(0.5)
    finally:
        job.stop()
        job.finish()
    rep = build_report(session_from_file(str(path)).snapshot(window=None))
    assert rep["command"][-1].endswith("slow_steps.py") and rep["record_path"] == path
    assert rep["steps"]["count"] > before  # from the start (history), not from the toggle
    assert (
        rep["processes"][0]["role"] == "main" and rep["processes"][0]["cpu_percent_avg"] is not None
    )
    assert rep["exit_code"] is None  # stopped before the job ended


LEAVE = """
import sys, time
from perftop.monitor.jobenv import RunConfig
from perftop.monitor.runner import Job
from perftop.probes import make_sources
cfg = RunConfig((sys.executable, sys.argv[1]), record=sys.argv[2], capture_output=True)
job = Job(cfg, sources=[make_sources(0.5)]).start()
end = time.time() + 40
while time.time() < end and (job.hub.latest is None or job.hub.latest.steps.count < 20):
    time.sleep(0.1)
time.sleep(0.5)
bg = job.leave()
print(job.pid, bg, job.server.path, flush=True)
"""


def test_left_running_the_session_stays_attachable_and_recording(tmp_path):
    rec = tmp_path / "left.perftop"
    out = subprocess.run(
        [sys.executable, "-c", LEAVE, str(WORKLOADS / "slow_steps.py"), str(rec)],
        capture_output=True, text=True, timeout=60, cwd=tmp_path,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    job_pid, bg, sock = out.stdout.split()
    job_pid, bg = int(job_pid), int(bg)
    left_at = time.time()
    try:
        assert alive(job_pid) and alive(bg)
        time.sleep(2.0)
        ls = json.loads(perftop("ls", "--json", cwd=tmp_path, timeout=60).stdout)
        mine = [s for s in ls["sessions"] if s["socket"] == sock]
        assert mine and mine[0]["monitor_pid"] == bg and mine[0]["job_pid"] == job_pid
        seen = tmp_path / "seen.perftop"
        att = perftop("attach", str(job_pid), "--headless", "--duration", "1",
                      "--record", str(seen), cwd=tmp_path, timeout=60)  # fmt: skip
        assert att.returncode == 0, att.stderr
        view = session_from_file(str(seen)).snapshot(window=None)
        # Every step since the first, from before the TUI left (history) to now (live).
        assert view.steps.count == view.steps.recent[-1].index + 1
        assert view.steps.recent[-1].t1 > left_at + 1.0
    finally:
        os.kill(job_pid, signal.SIGTERM)
    deadline = time.time() + 20
    while alive(bg) and time.time() < deadline:
        time.sleep(0.1)
    assert not alive(bg)  # it saw the job end, closed the recording and left
    assert not os.path.exists(sock)
    snap = session_from_file(str(rec)).snapshot(window=None)
    assert snap.steps.recent[-1].t1 > left_at + 2.0  # steps recorded after leaving
    assert snap.meta.state == "ended (exit code unknown)"
    assert any(p.cpu_percent_avg is not None for p in snap.processes)
    late = [p for p in snap.processes if p.pid == job_pid]
    assert late  # probes went on after leaving


def test_ranks_stalled_together_make_one_capture():
    from perftop.events import Hello

    s = Session()
    me = os.getpid()
    other = os.getppid()  # not in the job: never dumped, yet its stall is seen
    for rank, pid in ((0, me), (1, other)):
        s.apply(Hello(100.0, pid, 1, "h", ("train.py",), rank, rank, 2))
        for i in range(10):
            s.apply(Step(pid, i, 100.0 + i * 0.1, 100.0 + i * 0.1 + 0.1))
    got = []
    w = StallWatch(me, lambda *evs: got.extend(evs))
    w(s.snapshot(now=101.0 + 2.5))
    w(s.snapshot(now=101.0 + 3.0))
    deadline = time.time() + 20
    while not got and time.time() < deadline:
        time.sleep(0.05)
    time.sleep(0.5)
    assert len(got) == 1 and got[0].step == 10
    assert [pid for pid, _role, _frames in got[0].stacks] == [me]  # only the job's processes


def test_a_stall_without_py_spy_is_shown_with_the_reason(monkeypatch):
    """No py-spy (a missing dependency, an image without it): the stall or hang is still
    recorded, its stacks empty and the reason said, never dropped in silence."""
    from perftop.monitor import stacks

    monkeypatch.setattr(stacks, "pyspy", lambda: None)
    s = Session()
    for i in range(10):
        s.apply(Step(os.getpid(), i, 100.0 + i * 0.1, 100.0 + i * 0.1 + 0.1))
    got = []
    w = StallWatch(os.getpid(), lambda *evs: got.extend(evs))
    w(s.snapshot(now=101.0 + 2.5))
    deadline = time.time() + 20
    while not got and time.time() < deadline:
        time.sleep(0.05)
    assert len(got) == 1 and got[0].step == 10
    assert got[0].stacks == () and "py-spy is not installed" in got[0].note


def test_a_stall_is_named_by_the_step_that_was_running_once_its_steps_come():
    """The capture names the step after the last one the monitor had (5); steps the process
    had ended but not sent (5 to 7, a single-threaded job's) come after it, in a frame as
    the live ingest has them and one by one as a recording's reader has them: the stall is
    the step running at the capture (8), stalled since it began. A hang between steps
    (pid 3: steps 5 to 9 ended before its evaluation) is of the step after it, and keeps
    its own length; a step that ended while the stacks were dumped (pid 5) keeps its stall;
    a hang begun 0.3 s after the last step sent whose capture was over 1.85 s into it (pid 6:
    a quick dump, CI's failure of test_sender_solo) is still the step that hung; another
    process's steps and a process that never goes on change nothing."""
    from perftop.events import StallCapture
    from perftop.wire import STEP_RECORD, StepBatch

    def step(pid: int, i: int, t0: float, t1: float) -> tuple:
        return (pid, i, t0, t1, 0.0, 0.0, 0.0, 0)

    def run(pid: int, first: int, last: int, t: float = 100.0) -> list[tuple]:
        return [
            step(pid, i, t + (i - first) * 0.1, t + (i - first + 1) * 0.1)
            for i in range(first, last)
        ]

    for batched in (True, False):
        s = Session()
        for rec in run(1, 0, 5) + run(3, 0, 5) + run(6, 0, 5):
            s.apply(Step(*rec[:4]))
        s.apply(StallCapture(103.5, 1, 5, 3.0, 0.1))
        s.apply(StallCapture(103.6, 2, 5, 3.0, 0.1))  # never goes on
        s.apply(StallCapture(103.7, 3, 5, 2.9, 0.1, during="eval"))  # eval from 101.0
        s.apply(StallCapture(103.5, 5, 5, 3.0, 0.1))  # its step 5 ends during the dump
        s.apply(StallCapture(102.65, 6, 5, 2.15, 0.1))  # caught at 102.5, a 0.15 s dump
        later = run(4, 0, 9, 103.0) + run(1, 5, 8, 100.5) + [step(1, 8, 100.8, 104.0)]
        later += run(1, 9, 12, 104.0) + run(3, 5, 10, 100.5) + run(3, 10, 12, 103.8)
        later += [step(5, 5, 100.5, 103.4)] + run(5, 6, 9, 103.4)
        later += run(6, 5, 8, 100.5) + [step(6, 8, 100.8, 103.8)] + run(6, 9, 11, 103.8)
        if batched:
            s.apply(StepBatch(b"".join(STEP_RECORD.pack(*r) for r in later)))
        else:
            for rec in later:
                s.apply(Step(*rec[:4]))
        got = {(r.pid, r.step, r.stalled_s, r.during) for r in s.snapshot(window=None).stalls}
        want = {(1, 8, 2.7, ""), (2, 5, 3.0, ""), (3, 10, 2.9, "eval"), (5, 5, 3.0, "")}
        want.add((6, 8, 1.85, ""))
        assert got == want, (batched, got)


def test_work_after_the_last_step_is_no_stalled_step_once_the_job_ended_well(tmp_path):
    """A job that uploads for 4 s after its last of 60 steps, then exits 0: live, that is
    a step late (perftop's line says "step 61 stalled"); once the job has ended well it is
    no step at all, and the report says so ("step 61 of pid N: stalled", of a job of 60
    steps, it said)."""
    proc, rep = run_and_report(tmp_path, sys.executable, str(WORKLOADS / "idle_tail.py"))
    assert proc.returncode == 0, proc.stderr
    assert rep["steps"]["count"] == 60
    # headless: said live as a stall, and at the end what it was (a log read later)
    said = proc.stderr.splitlines()
    live = [i for i, ln in enumerate(said) if "stalled" in ln and "stacks captured" in ln]
    end = [i for i, ln in enumerate(said) if "work after training (said live as a stall)" in ln]
    assert live and end and live[0] < end[0], proc.stderr
    assert said[end[0]].startswith("perftop: after the last step (60) of pid "), proc.stderr
    assert rep["stalls"] and all(s["after_last_step"] for s in rep["stalls"]), rep["stalls"]
    tail = rep["stalls"][-1]
    # the last step (index 59), and the time from its end to the capture, within the 4 s
    # after it (the capture came 2 s after the last step sent, which may be a few before
    # the last: those were sent at the exit)
    assert tail["last_step"] == 59 and 1.0 <= tail["no_step_s"] <= 4.5, tail
    text = perftop("report", str(tmp_path / "r.perftop"), cwd=tmp_path).stdout
    assert "After the last step (stacks captured while no step came)" in text, text
    assert "after the last step (60) of pid" in text and "Stalled steps" not in text, text
    assert "idle_tail.py:17 <module>" in text, text  # where it was: the upload


def test_a_stall_after_the_last_step_stays_one_where_the_job_failed_or_steps_came():
    """The model's side of it: a capture after the last step is the job's tail only where
    the job exited with 0; killed or failed there, it was stopped in a hang; a step that
    came after the capture makes it a stall of that step, whatever the end."""
    from perftop.events import JobExit, StallCapture
    from perftop.flows.attach import stack_summary
    from perftop.model.stacks import after_last_step
    from perftop.report.text import summary

    def ended(code: int, sig: int = 0, more: bool = False) -> tuple[int, float] | None:
        s = Session()
        for i in range(10):
            s.apply(Step(1, i, 100.0 + i * 0.1, 100.1 + i * 0.1))
        s.apply(StallCapture(103.1, 1, 10, 2.1, 0.1))
        if more:
            s.apply(Step(1, 10, 101.0, 103.5))
        s.apply(JobExit(104.0, 1, code, signal=sig))
        snap = s.snapshot(window=None)
        tail = after_last_step(snap, snap.stalls[0])
        # the headless summary's last word on it (`perftop run`, `attach`), and attach's
        # stall line, which says a stall only where it is one
        said = summary(snap, None).splitlines() + stack_summary(snap)
        work = (
            "perftop: after the last step (10) of pid 1: no step in the 2.1 s to the capture "
            "nor after it, to the job's end: work after training (said live as a stall)"
        )
        assert said[-1] == (
            work
            if tail
            else f"perftop: 1 stall(s); last: step {snap.stalls[0].step + 1} stalled 2.1 s"
        ), said  # work after training is no stall counted
        assert (work in said) == bool(tail) and ("stall(s)" in "".join(said)) != bool(tail)
        return tail

    last, idle = ended(0) or (None, 0.0)
    assert last == 9 and abs(idle - 2.1) < 1e-9  # step 9 ended at 101.0, the capture at 103.1
    assert not ended(3) and not ended(137, sig=9) and not ended(0, more=True)
    # under collect, another node's process of the same pid, whose steps went on, says
    # nothing of this one's
    s = Session()
    for i in range(10):
        s.apply(Step(1, i, 100.0 + i * 0.1, 100.1 + i * 0.1))
    s.apply(JobExit(104.0, 1, 0))
    snap = s.snapshot(window=None)
    mine = replace(snap.steps, host="a")
    other = replace(mine, host="b", recent=(replace(mine.recent[-1], index=12, t1=103.9),))
    fleet = replace(snap, ranks=(other, mine), stalls=(StallRow(103.1, 1, 10, 2.1, 0.1, host="a"),))
    last, idle = after_last_step(fleet, fleet.stalls[0]) or (None, 0.0)
    assert last == 9 and abs(idle - 2.1) < 1e-9


def test_a_stall_whose_step_ended_before_its_capture_came_keeps_its_step():
    """The stalled step (5, 2.5 s) ended while the stacks were dumped, and its event and
    13 quick steps after it came before the capture's (a loaded host, a slow dump): the
    next step to come (19, begun 15 ms before the capture ended) cannot be the one that
    ran 2 s or more (it was read as "step 19 stalled 0.015 s"); the capture's own step
    and length stay (the loop fuzzer's campaign)."""
    from perftop.events import StallCapture

    s = Session()
    for i in range(5):
        s.apply(Step(1, i, 100.0 + i * 0.1, 100.1 + i * 0.1))
    s.apply(Step(1, 5, 100.5, 103.0))
    for i in range(6, 19):
        s.apply(Step(1, i, 103.0 + (i - 6) * 0.01, 103.01 + (i - 6) * 0.01))
    s.apply(StallCapture(103.15, 1, 5, 2.65, 0.1))
    s.apply(Step(1, 19, 103.135, 103.145))
    s.apply(Step(1, 20, 103.145, 103.155))
    got = [(r.step, r.stalled_s) for r in s.snapshot(window=None).stalls]
    assert got == [(5, 2.65)], got


def test_a_stall_named_again_by_its_step_is_not_said_again():
    """The headless line (and the TUI's notice, by the same ``new_stalls``) says a stall
    once, at its capture; the model naming it by its own step once the steps come is no
    new stall."""
    from perftop.events import StallCapture
    from perftop.flows.notices import Notices

    s = Session()
    for i in range(5):
        s.apply(Step(1, i, 100.0 + i * 0.1, 100.1 + i * 0.1))
    said: list[str] = []
    notices = Notices(out=said.append)
    s.apply(StallCapture(103.5, 1, 5, 3.0, 0.1))
    notices(s.snapshot())
    for i, (t0, t1) in enumerate([(100.5, 100.6), (100.6, 104.0), (104.0, 104.1)], start=5):
        s.apply(Step(1, i, t0, t1))
    notices(s.snapshot())
    assert [r.step for r in s.snapshot(window=None).stalls] == [6]
    assert said == ["perftop: step 6 stalled 3.0 s: stacks captured"], said  # index 5, from 1


def test_stalls_awaiting_their_step_are_as_many_as_the_stalls_kept():
    """A recording of stalls of processes that never go on (a hostile one: a stall of a new
    pid each) keeps the last MAX_STALLS, and no more waiting for their steps."""
    from perftop.events import StallCapture
    from perftop.model.stacks import MAX_STALLS, StacksReducer

    r = StacksReducer()
    for pid in range(1000):
        r.apply(StallCapture(100.0 + pid, pid, 5, 3.0, 0.1))
    assert len(r.stalls) == MAX_STALLS
    assert sum(map(len, r.unplaced.values())) == MAX_STALLS and min(r.unplaced) == 950
    r.apply(Step(999, 5, 1098.0, 1104.0))  # the last one's step goes on: placed
    assert 999 not in r.unplaced and r.stalls[-1].step == 5


def test_a_stack_in_backward_names_the_users_line_not_perftops_pass_through():
    """A training thread in backward() has perftop's pass-through (``_engine_run_backward``,
    hook/torch_patch.py) as its innermost Python frame: the stall read
    ``torch_patch.py:175 _wrap_engine.<locals>._engine_run_backward``."""
    from pathlib import Path

    import perftop.hook.torch_patch
    from perftop.model.stacks import where

    hook = str(Path(perftop.hook.torch_patch.__file__).absolute())
    torch = "/v/lib/python3.11/site-packages/torch"
    frames = (
        ("_wrap_engine.<locals>._engine_run_backward", hook, 175),
        ("backward", f"{torch}/autograd/__init__.py", 353),
        ("backward", f"{torch}/_tensor.py", 648),
        ("main", "/home/u/train.py", 50),
    )
    assert where(frames) == "train.py:50 main → backward"


def test_stacks_read_after_the_stalled_step_ended_are_left_out():
    """A step just over the stall's bar (mmengine's 2 s sleep at an epoch's turn: 2.02 s)
    ended while the monitor noticed it, and its stacks were read after: they showed the
    next step's optimizer, said as the stall's ("step 226 stalled 2.1 s … sgd.py"). The
    stall stays, its stacks go, a note says why; whether the step's end comes before the
    capture or after it. Stacks read while the step still ran, and a capture that does not
    say when its dump began (an older recording), keep theirs."""
    from perftop.events import StallCapture

    frames = ((1, "main", (("_single_tensor_sgd", "/x/torch/optim/sgd.py", 379),)),)
    for before in (True, False):
        for dump_s, kept in ((0.1, False), (0.15, True), (0.0, True)):
            s = Session()
            for i in range(5):
                s.apply(Step(1, i, 100.0 + i * 0.1, 100.1 + i * 0.1))
            stalled = Step(1, 5, 100.5, 102.52)  # ended at 102.52
            # noticed at 102.5 (2.0 s), read from 102.65 - dump_s, over at 102.65
            capture = StallCapture(102.65, 1, 5, 2.15, 0.1, frames, dump_s=dump_s)
            for ev in (stalled, capture) if before else (capture, stalled):
                s.apply(ev)
            s.apply(Step(1, 6, 102.52, 102.62))
            (row,) = s.snapshot(window=None).stalls
            assert (row.step, bool(row.stacks)) == (5, kept), (before, dump_s, row)
            if not kept:
                assert row.note == (
                    "step 6 ended 30 ms before its stacks were read: they showed what ran "
                    "after it, and are left out"
                ), row.note
