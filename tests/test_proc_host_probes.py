"""The process-tree and host probes on real processes, and the probe events' encoding."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time

import psutil

from perftop.events import HostSample, ProcInfo, ProcSample, decode
from perftop.events.probes import proc_row
from perftop.model import Session
from perftop.monitor.hookless import HooklessWatch
from perftop.monitor.jobenv import hook_env
from perftop.probes.host import HostProbe
from perftop.probes.procread import (
    START_RESOLUTION_S,
    _start_ticks,
    descendants,
    start_seconds,
)
from perftop.probes.procs import ProcProbe

TREE = """
import subprocess, sys, time
kids = [subprocess.Popen([sys.executable, "-c", c]) for c in sys.argv[1:]]
for k in kids:
    k.wait()
"""
BUSY = "import time\nend = time.time() + 10\nwhile time.time() < end: pass"
# touches its 40 MiB, then says so (a file): on a busy host that can take over a second,
# and the probe may keep a USS read a few seconds (its budget): sampled once it is done
ALLOC = (
    "import time\nb = bytearray(40 * 2**20)\nfor i in range(0, len(b), 4096): b[i] = 1\n"
    "open(%r, 'w').close()\ntime.sleep(10)"
)
SHORT = "import time; time.sleep(1.5)"


def _state(pid: int) -> str:
    """``pid``'s state letter ("" once it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return ""


def _kill_tree(top: subprocess.Popen) -> None:
    """The test's process and every process below it (else they outlive their parent)."""
    for pid in set(descendants(top.pid)) - {top.pid}:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    top.kill()
    top.wait()


def rows(events) -> dict[int, dict]:
    (sample,) = [e for e in events if isinstance(e, ProcSample)]
    return {r[0]: proc_row(r) for r in sample.rows}


def test_tree_with_grandchildren_cpu_memory_and_clean_exits(python, tmp_path):
    touched = tmp_path / "touched"
    top = subprocess.Popen([python, "-c", TREE, BUSY, ALLOC % str(touched), SHORT])
    try:
        end = time.monotonic() + 30
        while not touched.exists() and time.monotonic() < end:
            time.sleep(0.05)
        probe = ProcProbe(top.pid)
        first = probe.sample(time.time())
        infos = [e for e in first if isinstance(e, ProcInfo)]
        seen = rows(first)
        assert len(seen) == 4 and top.pid in seen  # the top process and its 3 children
        assert {r["ppid"] for p, r in seen.items() if p != top.pid} == {top.pid}
        assert any("bytearray" in i.cmdline for i in infos)
        assert all(r["cpu_percent"] is None for r in seen.values())  # no previous sample
        (short,) = [i.pid for i in infos if "sleep(1.5)" in i.cmdline]
        time.sleep(1.0)
        end = time.monotonic() + 30
        while _state(short) not in ("Z", "") and time.monotonic() < end:
            time.sleep(0.05)  # until it exited (a zombie until its parent reaps it)
        later = rows(probe.sample(time.time()))
        assert len(later) == 3  # SHORT exited between the two reads: simply gone
        busy = max(later.values(), key=lambda r: r["cpu_percent"])
        # a busy loop's share of a core: near 100 idle, 42 seen with three test processes
        # and their jobs on two cores; an idle child reads ~0
        assert busy["cpu_percent"] > 20 and busy["threads"] == 1 and busy["state"]
        big = max(later.values(), key=lambda r: r["uss"])
        assert big["uss"] > 38 * 2**20 and big["rss"] >= big["pss"] >= big["uss"]
        assert big["pss"] - big["uss"] < 10 * 2**20
        assert all(r["io_read"] is not None for r in later.values())
        s = Session()
        s.apply_all(first + probe.sample(time.time()))
        procs = {p.pid: p for p in s.snapshot(window=None).processes}
        assert len(procs) == 4 and sum(not p.alive for p in procs.values()) == 1
        assert {r.role for r in s.snapshot(window=None).roles} == {"other"}
    finally:
        _kill_tree(top)
    assert rows(probe.sample(time.time())) == {}  # the whole job gone: an empty sample


def test_a_process_born_since_the_last_tick_reads_its_cpu_share_from_its_birth(python, tmp_path):
    """A DataLoader worker of a short evaluation may live for one tick: its first read
    gives its CPU share since its birth (a busy child most of a core, an idle one near
    none), where it was N/A; a process born before the probe's sight (the job's root, a
    job attached to) has none at its first read, as before (its life's average is no
    share of the last tick)."""
    go = tmp_path / "go"
    wait = f"import os, time\nwhile not os.path.exists({str(go)!r}): time.sleep(0.01)\n"
    top = subprocess.Popen([python, "-c", wait + TREE, BUSY, "import time; time.sleep(10)"])
    try:
        time.sleep(0.1)  # born before the probe's sight: more than its start time's tick
        probe = ProcProbe(top.pid)
        time.sleep(0.3)
        first = rows(probe.sample(time.time()))
        assert list(first) == [top.pid] and first[top.pid]["cpu_percent"] is None
        go.touch()
        end = time.monotonic() + 30
        while len(descendants(top.pid)) < 3 and time.monotonic() < end:
            time.sleep(0.02)
        time.sleep(0.8)
        events = probe.sample(time.time())
        later = rows(events)
        cmd = {e.pid: e.cmdline for e in events if isinstance(e, ProcInfo)}
        (busy,) = [r for p, r in later.items() if "while time.time()" in cmd.get(p, "")]
        (idle,) = [r for p, r in later.items() if "sleep(10)" in cmd.get(p, "")]
        # a busy loop's share of a core: near 100 idle, over 20 on a loaded CI host; the
        # idle child's is its interpreter's start (~30 ms over ~0.8 s)
        assert busy["cpu_percent"] is not None and busy["cpu_percent"] > 20, busy
        assert idle["cpu_percent"] is not None and idle["cpu_percent"] < 15, idle
    finally:
        _kill_tree(top)


def test_descendants_of_this_process_include_a_grandchild(python):
    top = subprocess.Popen([python, "-c", TREE, "import time; time.sleep(5)"])
    try:
        time.sleep(0.5)
        tree = descendants(os.getpid())
        assert os.getpid() in tree and top.pid in tree and len(tree) >= 3
    finally:
        top.kill()
        top.wait()


def test_host_sample_figures():
    probe = HostProbe()
    first = probe.sample(time.time())[0]
    assert isinstance(first, HostSample) and first.cpu_percent is None and first.mem_total
    end = time.process_time() + 0.3
    while time.process_time() < end:
        pass
    h = probe.sample(time.time())[0]
    assert len(h.per_core) == h.cpu_count == os.cpu_count()
    assert 0 < h.cpu_percent <= 100 and max(h.per_core) > 20
    assert h.iowait_percent is not None and h.load is not None and len(h.load) == 3
    assert 0 < h.mem_used < h.mem_total and h.mem_available
    assert h.disk_read is not None and h.net_rx is not None and h.dt > 0.25
    snap = Session()
    snap.apply_all([first, h])
    host = snap.snapshot(window=None).host
    assert host.cpu_percent_avg == h.cpu_percent  # the first sample has no CPU figure yet
    assert host.memory_used_bytes_max == max(first.mem_used, h.mem_used)


def test_probe_events_survive_json_round_trip():
    probe = ProcProbe(os.getpid())
    probe.sample(time.time())
    events = probe.sample(time.time()) + HostProbe().sample(time.time())
    for ev in events:
        back = decode(json.loads(json.dumps(ev.encode())))
        assert back == ev, (back, ev)


def test_events_and_hook_never_import_psutil_or_pynvml(python):
    code = "import sys, perftop.events, perftop.hook; print('psutil' in sys.modules, 'pynvml' in sys.modules)"
    out = subprocess.run([python, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


def test_exited_processes_leave_the_live_view_unless_the_job_is_over():
    from perftop.events.probes import PROC_FIELDS, ProcSample

    def row(pid: int) -> tuple:
        r = dict.fromkeys(PROC_FIELDS)
        r.update(pid=pid, ppid=1, name="p", state="S", cpu_percent=50.0, rss=100, uss=10,
                 pss=20)  # fmt: skip
        return tuple(r[k] for k in PROC_FIELDS)

    s = Session()
    s.apply(ProcSample(100.0, 1.0, 1, (row(1), row(2))))
    s.apply(ProcSample(101.0, 1.0, 1, (row(1),)))  # worker 2 exited
    live = {p.pid: p for p in s.snapshot().processes}
    assert live[2].alive is False and live[2].rss_bytes == 100  # shown a while, dimmed
    s.apply(ProcSample(110.0, 1.0, 1, (row(1),)))
    assert [p.pid for p in s.snapshot().processes] == [1]  # gone from the live view
    assert len(s.snapshot(window=None).processes) == 2  # the report keeps every process
    s.apply(ProcSample(111.0, 1.0, 1, ()))  # the whole job is over
    s.apply(ProcSample(130.0, 1.0, 1, ()))
    (last,) = s.snapshot().processes
    assert last.pid == 1 and not last.alive and last.uss_bytes == 10  # last figures stay


def test_a_process_seen_before_its_exec_gets_its_new_command_line():
    """A shell's child is first seen as a copy of the shell (fork), then runs its program
    (exec): its command line is read again, so nothing keeps the shell's (the hookless
    check reads it to tell a Python process started with -I from a shell)."""
    proc = subprocess.Popen(["sh", "-c", "sleep 0.7; exec sleep 3"])
    try:
        time.sleep(0.2)  # Popen's child is a copy of this Python until it runs sh
        probe = ProcProbe(proc.pid)
        events = probe.sample(time.time())
        first = {e.cmdline for e in events if isinstance(e, ProcInfo) and e.pid == proc.pid}
        assert first == {"sh -c sleep 0.7; exec sleep 3"}
        time.sleep(1.5)
        second = probe.sample(time.time())
        again = [e.cmdline for e in second if isinstance(e, ProcInfo) and e.pid == proc.pid]
        assert again == ["sleep 3"]
        events += second
        s = Session()
        s.apply_all(events)
        assert [p.cmdline for p in s.snapshot().processes if p.pid == proc.pid] == ["sleep 3"]
    finally:
        proc.kill()
        proc.wait()


BLANK = """
import sys, time
# The kernel reads an empty command line where the first byte of the argument area is a
# NUL and its last is not (as while a process execs, before its new arguments are set):
# written through /proc/self/mem, then put back once told (a byte on stdin).
fields = open("/proc/self/stat").read().rsplit(")", 1)[1].split()
start, end = int(fields[45]), int(fields[46])
with open("/proc/self/mem", "r+b", buffering=0) as mem:
    mem.seek(start)
    args = mem.read(end - start)
    mem.seek(start)
    mem.write(b"\\0" + b"x" * (end - start - 1))
    print("blank", flush=True)
    sys.stdin.read(1)
    mem.seek(start)
    mem.write(args)
print("back", flush=True)
time.sleep(5)
"""


def test_a_command_line_first_read_empty_is_read_again(python):
    """A process first seen with an empty command line (caught inside its exec of a program
    of the same name: one of Ray's, which kept showing as "python") gets its command line
    once it has one."""
    proc = subprocess.Popen([python, "-c", BLANK], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert proc.stdout is not None and proc.stdin is not None
        assert proc.stdout.readline() == b"blank\n"
        probe = ProcProbe(proc.pid)
        first = [e.cmdline for e in probe.sample(time.time()) if isinstance(e, ProcInfo)]
        assert first == [""]
        proc.stdin.write(b"x")
        proc.stdin.flush()
        assert proc.stdout.readline() == b"back\n"
        again = [e.cmdline for e in probe.sample(time.time()) if isinstance(e, ProcInfo)]
        assert len(again) == 1 and again[0].startswith(f"{python} -c "), again
    finally:
        proc.kill()
        proc.wait()


def test_a_python_without_torch_is_looked_at_less_often():
    """The no-hook watch reads a Python process's maps at each check (every second) for its
    first checks, then ever less often, up to every 8 s (a dozen of Ray's daemons never
    load torch); a process seen with torch is no longer looked for it."""
    w = HooklessWatch(1, lambda *events: None, ())
    times = [float(s) for s in range(60)]
    looked = [t for t in times if w.torch_due(7, t)]
    assert looked[:10] == times[:10]  # dense at first
    gaps = [b - a for a, b in zip(looked[10:], looked[11:])]
    assert gaps == sorted(gaps) and gaps[0] == 2.0 and max(gaps) == 8.0, gaps
    assert len(looked) < 20


def test_a_process_freeing_its_memory_at_exit_is_not_a_row_holding_none(python):
    """A process that exits frees its address space before it is a zombie: for about a
    millisecond a 512 MiB one reads state R and no resident page. Sampled at that moment
    it is gone, not a row saying it holds 0 bytes (seen in a CSV export of a real job)."""
    code = "import sys; b = b'x' * 2**29; print(1, flush=True); sys.stdin.read(1)"
    rss_seen: list[int | None] = []
    for _ in range(5):
        job = subprocess.Popen([python, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert job.stdout is not None and job.stdin is not None
        job.stdout.readline()
        probe = ProcProbe(job.pid)
        probe.sample(time.time())
        job.stdin.close()  # it exits now: sample it all the way out
        while (seen := rows(probe.sample(time.time()))) and len(rss_seen) < 100_000:
            rss_seen.append(seen[job.pid]["rss"])
        job.wait()
        assert rss_seen and rss_seen[0]
    assert 0 not in rss_seen


KIDS = """
import subprocess, sys
kids = [subprocess.Popen([sys.executable, "-c", c]) for c in sys.argv[1:]]
print(" ".join(str(k.pid) for k in kids), flush=True)
for k in kids:
    k.wait()
"""
IDLE = "import torch, time; time.sleep(60)"  # torch loaded, then off the CPU
SPINS = "import torch, time\nend = time.process_time() + 6\nwhile time.process_time() < end: pass\ntime.sleep(60)"


def test_a_process_with_torch_and_no_hook_is_said_once_it_ran_or_exited(python, tmp_path):
    """No hook here: the job's environment, as ``perftop run`` makes it, but no monitor
    listening (the hook stays silent). A process idle since torch loaded is not said to
    have failed however long that lasts (a busy host's slow rest of an import looks the
    same from outside), only once it ran ``grace_cpu_s`` on the CPU since, or exited."""
    said: list[str] = []
    w = HooklessWatch(1, lambda *evs: said.extend(e.text for e in evs), (), 0.2, 4.0)
    env = hook_env(tmp_path / "nobody.sock")
    top = subprocess.Popen(
        [python, "-c", KIDS, IDLE, SPINS], stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        assert top.stdout is not None
        idle, spins = map(int, top.stdout.readline().split())
        probe, s = ProcProbe(top.pid), Session()

        def watch_until_said(pid: int, within_s: float) -> None:
            """Sample the tree and let the watch look, as the monitor does, till ``pid``
            is said (or the time is up)."""
            end = time.monotonic() + within_s
            while not any(f"pid {pid} " in t for t in said) and time.monotonic() < end:
                s.apply_all(probe.sample(time.time()))
                snap = s.snapshot()
                w._scan(
                    [(p.pid, p.ppid, p.cmdline, p.name, p.alive) for p in snap.processes], set()
                )
                time.sleep(0.3)

        watch_until_said(spins, 90)
        assert any(f"pid {spins} " in t and "never said hello" in t for t in said), said
        assert idle in w.torch_since and not any(f"pid {idle} " in t for t in said), said
        os.kill(idle, signal.SIGKILL)
        watch_until_said(idle, 30)
        assert sum(f"pid {idle} " in t for t in said) == 1, said  # said once it exited
    finally:
        _kill_tree(top)


def test_ticks_close_together_read_a_cpu_share_a_process_can_have(python):
    """A process's CPU time counts in clock ticks (10 ms): a tick a few ms after the last
    read a busy single-threaded process at 0% or 300%+ (a rank at 335% on 2 cores). A
    share is over CPU_MIN_S at least; a tick sooner shows the last one."""
    busy = subprocess.Popen([python, "-c", BUSY])
    try:
        probe = ProcProbe(busy.pid)
        probe.sample(time.time())
        time.sleep(0.5)
        shares = []
        for _ in range(30):
            shares.append(rows(probe.sample(time.time()))[busy.pid]["cpu_percent"])
            time.sleep(0.003)
        assert all(s is not None and 0.0 <= s <= 105.0 for s in shares), shares
        assert max(shares) >= 5.0, shares  # it does run (its share of a loaded 2-core host)
    finally:
        busy.kill()
        busy.wait()


def test_a_whole_run_keeps_each_processs_reads_over_the_run_thinned():
    """Whole-run snapshots carry each process's read totals over the run (a short job's
    workers exit before the verdict: their last interval's rate goes with them), at most
    IO_MARKS of them however long the run, first and latest kept; live ones carry none."""
    from perftop.events.probes import PROC_FIELDS, ProcSample
    from perftop.model.resources import IO_MARKS

    def row(pid: int, read: int) -> tuple:
        r = dict.fromkeys(PROC_FIELDS)
        r.update(pid=pid, ppid=1, name="p", state="S", io_read=read)
        return tuple(r[k] for k in PROC_FIELDS)

    s = Session()
    n = 3 * IO_MARKS + 7
    for i in range(n):
        s.apply(ProcSample(100.0 + i, 1.0, 1, (row(2, 2**20),)))
    s.apply(ProcSample(100.0 + n, 1.0, 1, ()))  # it exited
    (live,) = s.snapshot().processes
    assert live.io_read_marks == () and live.io_read_bps is None
    (whole,) = s.snapshot(window=None).processes
    marks = whole.io_read_marks
    assert len(marks) <= IO_MARKS and marks[0] == (100.0, 2**20)
    assert marks[-1] == (100.0 + n - 1, n * 2**20) == (marks[-1][0], whole.io_read_bytes)
    assert all(b - a == (t1 - t0) * 2**20 for (t0, a), (t1, b) in zip(marks, marks[1:]))


def test_a_start_time_cut_to_its_clock_tick_is_no_birth_before_the_last_tick(python):
    """/proc/PID/stat gives a process's start time cut down to its clock tick (10 ms): a
    worker born a few ms after the last tick began read as born before it, so its first
    CPU share was N/A (a CI run: the busy child of the test above, born ~5-15 ms after the
    tick). The last tick here begins half a clock tick after the start time read."""
    busy = subprocess.Popen([python, "-c", BUSY])
    try:
        time.sleep(0.6)
        probe = ProcProbe(busy.pid)
        ticks = _start_ticks(psutil.Process(busy.pid))
        probe._since_boot = start_seconds(ticks) + START_RESOLUTION_S / 2
        (row,) = rows(probe.sample(time.time())).values()
        assert row["cpu_percent"] is not None and row["cpu_percent"] > 20, row
    finally:
        busy.kill()
        busy.wait()
