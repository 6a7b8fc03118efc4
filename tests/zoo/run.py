"""Running one loop of the zoo: rendered to ``loop.py`` in its own folder, run plainly, under
``perftop run --headless`` (sampled) and in the exact mode (``PERFTOP_SYNC=all``), then
checked by the oracles. The folder keeps the loop, its spec, and each run's count and
report, to read when it fails."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perftop.events import Between, Step, SyncBatch
from perftop.recording import read_events
from perftop.report.build import build_report, session_from_file
from tests.helpers import perftop
from tests.plainrun import start_plain
from tests.zoo.accounting import account
from tests.zoo.oracles import check, slower
from tests.zoo.parts import Spec
from tests.zoo.render import render

TIMEOUT = 300  # the plain run's; a run under perftop gets 10x the plain one's time, 60 s or more
RETRIES = 4  # the wall-time oracle runs plain and perftop again this often before failing:
# a 0.2 s loop on a shared 2-core host swings ±25% run to run (CPU speed, not scheduling)


@dataclass
class Result:
    spec: Spec
    folder: Path
    failures: list[str] = field(default_factory=list)

    def oracles(self) -> set[str]:
        return {f.split(":", 1)[0] for f in self.failures}

    def show(self) -> str:
        lines = [f"loop {self.folder}/loop.py", f"spec {self.spec.show()}", *self.failures]
        return "\n  ".join(lines)


def run_mode(
    folder: Path,
    mode: str,
    timeout: float = TIMEOUT,
    report: Callable[[Path], dict[str, Any]] | None = None,
) -> tuple[dict[str, Any] | None, dict[str, Any] | None, str]:
    """One run: (the loop's own count, perftop's report or None plainly, what went wrong)."""
    out = folder / f"{mode}.json"
    out.unlink(missing_ok=True)
    env = {**os.environ, "ZOO_OUT": str(out), "PYTHONWARNINGS": "ignore"}
    loop = [sys.executable, str(folder / "loop.py")]
    rec = folder / f"{mode}.perftop"
    if mode == "plain":
        cmd = loop
    else:
        env["PERFTOP_SYNC"] = "all" if mode == "exact" else "sampled"
        cmd = [sys.executable, "-m", "perftop", "run", "--headless", "--force"]
        cmd += ["--record", str(rec), "--", *loop]
    if mode == "plain":  # forked from a warmed interpreter (tests/plainrun.py)
        p: Any = start_plain(cmd, cwd=folder, env=env)
    else:
        p = subprocess.Popen(
            cmd, cwd=folder, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True, stdin=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
    try:
        log = "".join(x or "" for x in p.communicate(timeout=timeout))
    except subprocess.TimeoutExpired:  # the loop and perftop alike: their own group
        os.killpg(p.pid, signal.SIGKILL)
        log = "".join(x or "" for x in p.communicate())
        (folder / f"{mode}.log").write_text(log)
        return None, None, f"ran: {mode}: still running after {timeout:.0f} s, killed"
    (folder / f"{mode}.log").write_text(log)
    if p.returncode or not out.exists():
        return None, None, f"ran: {mode}: exit {p.returncode}: {log.strip()[-300:]}"
    own = json.loads(out.read_text())
    if mode == "plain":
        return own, None, ""
    if report is not None:
        got = report(rec)
        (folder / f"{mode}.events.json").write_text(json.dumps(timeline(rec, got)))
        return own, got, ""
    rep = perftop("report", "--json", str(rec), cwd=folder)  # the CLI's main(), in this process
    if rep.returncode:
        return own, None, f"ran: {mode}: report exit {rep.returncode}: {rep.stderr.strip()}"
    (folder / f"{mode}.report.json").write_text(rep.stdout)
    report = json.loads(rep.stdout)
    (folder / f"{mode}.events.json").write_text(json.dumps(timeline(rec, report)))
    return own, report, ""


def timeline(rec: Path, report: dict[str, Any]) -> dict[str, Any]:
    """The trainer's steps ``[index, t0, t1, data]`` and intervals between steps ``[kind,
    t0, length]`` from the recording, for the oracles of issue 30 (kept beside the
    report, so a campaign's loops can be checked again without their recordings)."""
    pid = report["steps"]["pid"]
    steps, between, watched = [], [], set()
    for ev in read_events(rec):
        if isinstance(ev, Step) and ev.pid == pid:
            steps.append([ev.index, ev.t0, ev.t1, ev.data])
        elif isinstance(ev, Between) and ev.pid == pid:
            between.append([ev.kind, ev.t0, ev.length])
        elif isinstance(ev, SyncBatch) and ev.pid == pid and ev.sampled:
            watched.add(ev.step)
    # the steps the detector watched, for the stack oracle (not a report key)
    report["_watched"] = sorted(watched)
    return {"pid": pid, "steps": steps, "between": between, "watched": sorted(watched)}


def account_runs(spec: Spec, folder: Path, runs: dict[str, tuple[dict, dict]]) -> list[str]:
    """Issue 30's oracles (tests/zoo/accounting.py) on the sampled run: the run users make."""
    if "sampled" not in runs:
        return []
    own, rep = runs["sampled"]
    tl = json.loads((folder / "sampled.events.json").read_text())
    return account(spec, own, rep, tl)


def run_spec(
    spec: Spec, folder: Path, modes: tuple[str, ...] | None = None, wall: bool = True
) -> Result:
    """``modes``: by default the exact mode too where the loop has syncs to count."""
    if modes is None:
        counts = spec.syncs or spec.host_transform or spec.evaluate or spec.sample
        modes = ("sampled", "exact") if counts and not spec.compiled else ("sampled",)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "loop.py").write_text(render(spec))
    (folder / "spec.txt").write_text(spec.show() + "\n")
    res = Result(spec, folder)
    plain, _, why = run_mode(folder, "plain")
    if plain is None:
        res.failures.append(why)
        return res
    runs = {}
    limit = max(60.0, 10 * plain["wall_s"] + 30)
    for mode in modes:
        own, rep, why = run_mode(folder, mode, limit)
        if own is None or rep is None:
            res.failures.append(why)
            continue
        runs[mode] = (own, rep)
    res.failures += check(spec, plain, runs)
    res.failures += account_runs(spec, folder, runs)
    if wall and "sampled" in runs:  # again while the machine is busy: the best run of each
        plains, owns = [plain], [runs["sampled"][0]]
        slow = slower(plains, owns)
        for _ in range(RETRIES if slow else 0):
            again, _, _ = run_mode(folder, "plain")
            own, _, _ = run_mode(folder, "sampled", limit)
            if again is None or own is None:
                slow = "wall_time: a rerun failed"
                break
            plains.append(again)
            owns.append(own)
            slow = slower(plains, owns)
            if not slow:
                break
        if slow:
            res.failures.append(slow)
    (folder / "failures.txt").write_text("\n".join(res.failures) + "\n")
    return res


def run_accounting(spec: Spec, folder: Path, tries: int = 2) -> Result:
    """Issue 30's oracles alone, on one run under perftop (no plain run, the report built
    in this process): the cheap way for CI's regression shapes. Where a run fails, another
    decides, up to ``tries``: on a loaded 2-core host a rare stretch off the CPU lands on
    one side of perftop's bound and inside the loop's timer (2.4 ms once in a CI run, after
    a sampling pass's last forward, none of it collections or waiting for a core: perhaps
    a GIL held by a thread scheduled out; not established), while an error of perftop's
    fails every run. The campaign (scripts/loop_fuzz.py) checks each loop once."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "loop.py").write_text(render(spec))
    res = Result(spec, folder)
    for k in range(tries):
        res.failures = []
        own, rep, why = run_mode(folder, "sampled", max(60.0, TIMEOUT / 5), report=_report_here)
        if own is None or rep is None:
            res.failures.append(why)
            return res
        if rep["steps"]["count"] != own["steps"]:
            res.failures.append(f"steps: perftop {rep['steps']['count']} != {own['steps']}")
        res.failures += account_runs(spec, folder, {"sampled": (own, rep)})
        if not res.failures:
            break
        if k + 1 < tries:
            print(f"run {k + 1} of {tries} failed: {res.failures}", flush=True)  # in the log
    return res


def _report_here(rec: Path) -> dict[str, Any]:
    """``perftop report --json`` of a recording, built in this process."""
    snap = session_from_file(str(rec)).snapshot(window=None)
    return json.loads(json.dumps(build_report(snap)))
