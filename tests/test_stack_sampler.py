"""Observer mode's stack sampler against a real Python process and real py-spy: a dump
that fails once (a worker caught starting up, a dump past its timeout on a loaded host) is
tried again; a process that keeps failing, or refuses, is given up on with one note."""

from __future__ import annotations

import subprocess
import sys

import pytest

from perftop.events import Note, StackSample
from perftop.monitor import sampler as sampler_mod
from perftop.monitor import stacks

pytestmark = pytest.mark.skipif(stacks.pyspy() is None, reason="py-spy is not installed")


@pytest.fixture
def job():
    """A Python process past its start: py-spy cannot find the interpreter of one just
    started, and two such real failures after the test's own one gave it up (CI)."""
    code = "import time\nprint('ready', flush=True)\nwhile True: time.sleep(0.01)"
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert p.stdout is not None and p.stdout.readline().strip() == "ready"
    yield p.pid
    p.kill()
    p.wait()


def _failing(monkeypatch, times: int, permission: bool = False) -> list[int]:
    """The real dump, failing its first ``times`` calls as py-spy does."""
    real, calls = stacks.dump, []

    def dump(pid: int, **kw):
        calls.append(pid)
        if len(calls) <= times:
            raise stacks.StackError("Failed to find python version from target process",
                                    permission=permission)  # fmt: skip
        return real(pid, **kw)

    monkeypatch.setattr(stacks, "dump", dump)
    return calls


def _tick(s: sampler_mod.StackSampler) -> list:
    got: list = []
    for _ in range(20):  # py-spy may not find the interpreter in a process just started
        got = s.tick()
        if any(isinstance(e, StackSample) for e in got):
            break
    return got


def test_one_failed_dump_is_tried_again(job, monkeypatch):
    calls = _failing(monkeypatch, 1)
    s = sampler_mod.StackSampler(job, lambda *e: None)
    assert s.tick() == []  # failed once: no sample, no note
    got = _tick(s)
    assert [type(e) for e in got] == [StackSample] and got[0].pid == job
    assert len(calls) >= 2 and s.samples == 1


def test_a_process_that_keeps_failing_is_given_up_with_one_note(job, monkeypatch):
    calls = _failing(monkeypatch, 100)
    s = sampler_mod.StackSampler(job, lambda *e: None)
    got = [e for _ in range(sampler_mod.TRIES + 3) for e in s.tick()]
    assert len(calls) == sampler_mod.TRIES
    assert [type(e) for e in got] == [Note] and f"pid {job}" in got[0].text


def test_a_refusal_is_given_up_at_once(job, monkeypatch):
    calls = _failing(monkeypatch, 100, permission=True)
    s = sampler_mod.StackSampler(job, lambda *e: None)
    got = [e for _ in range(3) for e in s.tick()]
    assert len(calls) == 1 and [type(e) for e in got] == [Note]
