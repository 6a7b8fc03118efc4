"""Loop shapes that the sync detector got wrong (issue 29), each in a real job under
``perftop run --headless``, read back with ``perftop report --json``."""

from __future__ import annotations

import json
import sys

import pytest

from perftop.fmt_sync import sync_rate
from tests.helpers import WORKLOADS, run_and_report
from tests.plainrun import run_plain
from tests.test_sync_e2e import sites_marked


def job_json(out: str) -> dict:
    """The job's own account: its one JSON line on stdout."""
    return json.loads(next(ln for ln in out.splitlines() if ln.startswith("{")))


@pytest.mark.parametrize("update", ["--data", "--no-grad"])
def test_a_manual_update_leaves_no_mode_in_the_job(tmp_path, monkeypatch, update):
    """backward() then a hand-written update: the step ends inside the dispatch of
    ``Tensor.backward`` to perftop's mode. The mode is on the stack in the watched steps
    only (and the one after, passing calls through), never twice, and gone at the end."""
    monkeypatch.setenv("PERFTOP_SYNC_SEED", "0")  # a draw that watches none of steps 10-40
    script = WORKLOADS / "sync_manual.py"
    proc, rep = run_and_report(tmp_path, sys.executable, str(script), update)
    assert proc.returncode == 0, proc.stdout + proc.stderr  # exit 3: a mode stayed
    job = job_json(proc.stdout)
    assert job["end"] == 0  # as in a plain run
    assert max(job["depths"]) <= 1
    assert job["depths"][10:] == [0] * 30  # early samples over: nothing of perftop's left
    assert rep["steps"]["count"] == 40
    (line,) = sites_marked(script)
    (site,) = rep["sync_events"]
    assert (site["line"], site["op"]) == (line, "item")
    assert site["per_step"] == pytest.approx(1.0)  # one copy counting, not several


def sites(rep: dict) -> dict[tuple[int, str], float]:
    return {(e["line"], e["op"]): e["per_step"] for e in rep["sync_events"]}


def test_a_transform_on_host_samples_is_no_site(tmp_path, monkeypatch):
    """``Normalize``'s ``device=tensor.device`` follows a host sample: its ``bool()`` is
    no sync on any device, 8 times a batch; the loss's ``.item()`` is."""
    monkeypatch.setenv("PERFTOP_SYNC", "all")
    script = WORKLOADS / "sync_transform.py"
    proc, rep = run_and_report(tmp_path, sys.executable, str(script))
    assert proc.returncode == 0, proc.stderr
    (line,) = sites_marked(script)
    assert sites(rep) == {(line, "item"): pytest.approx(1.0)}


def test_data_sent_to_the_device_before_the_loop_is_not_known_on_cpu(tmp_path, monkeypatch):
    """A data set moved with ``.to(device)`` before the loop, and a meter sent there
    before it: on a GPU their device says they are device data; on CPU nothing does, since
    perftop replaces no ``Tensor`` method to see the sends (it once wrapped ``Tensor.to``
    and ``.cuda`` until the first step ended: tests/test_torch_invariants.py). So a CPU run
    reports no site on them, never one a GPU run would not have."""
    monkeypatch.setenv("PERFTOP_SYNC", "all")
    script = WORKLOADS / "sync_preloaded.py"
    proc, rep = run_and_report(tmp_path, sys.executable, str(script))
    assert proc.returncode == 0, proc.stderr
    assert set(sites_marked(script).values()) == {"unique", "meter"}
    assert rep["steps"]["count"] == 30
    assert sites(rep) == {}


def test_advice_for_an_item_does_not_assume_a_loss(tmp_path):
    """``action.item()`` feeds an environment: the hint names the call, its line and
    rate, and says what to do for either use instead of calling it a loss."""
    script = WORKLOADS / "sync_policy.py"
    proc, rep = run_and_report(tmp_path, sys.executable, str(script))
    assert proc.returncode == 0, proc.stderr
    (line,) = sites_marked(script)
    hint = next(h for h in rep["hints"] if h["id"] == "host-device-sync")
    # its rate as the Sync table gives it (the hint once read "1.2/step" where the table
    # said "in 4 of 5 watched steps": a rate the sampling could not yet tell)
    (site,) = [e for e in rep["sync_events"] if e["line"] == line]
    rate = sync_rate(site["per_step"], site["per_step_error"], site["seen_steps"],
                     every=site["every_step"], watched=site["watched_steps"])  # fmt: skip
    assert "1.00" in rate or "watched steps" in rate, rate
    assert any(
        f"sync_policy.py:{line} item" in e and (e.endswith(rate) or f"{rate} a step" in e)
        for e in hint["evidence"]
    ), (hint["evidence"], rate)
    (advice,) = hint["advice"]
    assert advice.startswith(f"sync_policy.py:{line}: item()")
    assert "loss" not in advice.split("if it is logged")[0]  # no guess that it is a loss
    assert "cannot tell" in advice and "every step" in advice and "every N steps" in advice


def test_a_gans_first_watched_step_holds_no_part_of_step_0(tmp_path):
    """The DCGAN shape: two backward() calls before the first optimizer step, then the
    generator's: one step an iteration, no phase longer than a step. A sample
    that began before the steps settled held part of step 0: D_G_z1's line, once an
    iteration, read 1.33/step."""
    script = WORKLOADS / "sync_gan.py"
    proc, rep = run_and_report(tmp_path, sys.executable, str(script), "1")
    assert proc.returncode == 0, proc.stderr
    st = rep["steps"]
    assert st["count"] == 40  # one step an iteration of the two optimizers
    assert all(v <= st["step_time_s"]["max"] for v in st["phases_s"].values()), st
    lines = {n: text for n, text in enumerate(script.read_text().splitlines(), 1)}
    items = {e["line"]: e["per_step"] for e in rep["sync_events"] if e["op"] == "item"}
    named = {lines[n].split("# ")[-1].split(":")[0]: v for n, v in items.items()}
    assert named == {"D_x": 1.0, "D_G_z1": 1.0, "D_G_z2": 1.0}, (named, rep["sync_events"])


def test_a_metric_made_in_the_step_before_a_watched_one_and_jit_unchanged(tmp_path, monkeypatch):
    """An accuracy made before the update and formatted after it, in the next step: the
    step before a watched one learns marks, so the format is a site at its rate (every
    step but the first). ``torch.jit.script`` run in watched, primed and plain steps
    makes the same graphs, and the job computes the same losses and log, bit for bit;
    ``Tensor.to`` is torch's own again once the first step ended."""
    script = WORKLOADS / "sync_metric_jit.py"
    plain = run_plain([sys.executable, str(script)], cwd=tmp_path)
    assert plain.returncode == 0, plain.stderr[-2000:]
    # a watch every 3rd step on average, whatever it costs: many primed and watched steps
    monkeypatch.setenv("PERFTOP_SYNC_EARLY", "0")
    monkeypatch.setenv("PERFTOP_SYNC_EVERY", "3")
    monkeypatch.setenv("PERFTOP_SYNC_BUDGET_US", "1000000")
    proc, rep = run_and_report(tmp_path, sys.executable, str(script))
    assert proc.returncode == 0, proc.stderr[-2000:]
    want, got = job_json(plain.stdout), job_json(proc.stdout)
    assert max(got["depths"]) == 1  # some scripting ran with perftop's mode on the stack
    assert got["depths"][-1] == 0 or got["depths"].count(1) < len(got["depths"])
    del want["depths"], got["depths"]
    assert got == want
    marks = {name: n for n, name in sites_marked(script).items()}
    got_sites = {(e["line"], e["op"]): e for e in rep["sync_events"]}
    assert set(got_sites) == {(marks["acc"], "format"), (marks["loss"], "float")}
    for site in got_sites.values():  # each in every step (the format in all but step 0)
        assert site["watched_steps"] >= 5
        assert site["per_step"] == pytest.approx(1.0, abs=3 * site["per_step_error"] + 0.05)


@pytest.mark.parametrize("mode", ["sampled", "all"])
def test_syncs_of_a_trainer_thread_fed_by_the_main_thread(tmp_path, monkeypatch, mode):
    """The main thread iterates a DataLoader into a queue and a thread trains from it: the
    batches close steps on the main thread before training is seen, but the detector
    watches the thread that runs backward and the optimizer, and sees its ``.item()``."""
    monkeypatch.setenv("PERFTOP_SYNC", mode)
    script = WORKLOADS / "sync_trainer_thread.py"
    proc, rep = run_and_report(tmp_path, sys.executable, str(script))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert rep["steps"]["count"] == 40
    (line,) = sites_marked(script)
    assert sites(rep) == {(line, "item"): pytest.approx(1.0)}


def test_micro_batches_held_then_folded_are_no_watched_steps(tmp_path, monkeypatch):
    """Accumulation (4 micro-batches, an ``.item()`` in each): until its first optimizer
    step the tracker holds each backward as a step, then folds them into step 0. The
    syncs of those provisional steps are counted but in no watched step: in the exact mode
    the rate is 4 a step exactly (the HF Trainer's read 8.8 for 8, "in 7 of 5 watched
    steps": the first micro-batches were watched steps 1 and 2, and the real steps 1 and 2
    after the fold watched again)."""
    monkeypatch.setenv("PERFTOP_SYNC", "all")
    proc, rep = run_and_report(tmp_path, sys.executable, str(WORKLOADS / "sync_accum.py"))
    assert proc.returncode == 0, proc.stderr
    assert rep["steps"]["count"] == 30
    (site,) = rep["sync_events"]
    # steps 1-29 watched whole, and the micro-batches held as steps (step 0 is never watched)
    assert site["op"] == "item" and 116 < site["count"] < 120
    assert site["per_step"] == pytest.approx(4.0)  # exact: 4.07 with the held ones


def test_a_passes_last_sync_after_a_preemption_stays_the_passes(tmp_path, monkeypatch):
    """Issue 44 ("syncs in a pass belong to the pass"), found by the loop fuzzer's campaigns
    (a rollout's last ``float()`` booked in the next step, 1 pass in 15, on a busy host):
    behind a feeder the pass ends where the thread's time off the CPU since its last
    forward began, and a preemption before the pass's last sync moved that end before the
    sync. Here a 1 ms sleep stands for the preemption, and the next batch comes sooner
    than the feeder's usual (16 ms, against 20): every pass's sync, the last one (after the
    last step) too, is between steps, at 1 a pass, none in a step."""
    monkeypatch.setenv("PERFTOP_SYNC", "all")
    proc, rep = run_and_report(tmp_path, sys.executable, str(WORKLOADS / "rollout_tail_sync.py"))
    assert proc.returncode == 0, proc.stderr
    assert "passes 6" in proc.stdout and rep["steps"]["count"] == 60
    assert rep["sync_events"] == []
    (site,) = rep["sync_between"]
    assert site["op"] == "float" and site["count"] == 6 and site["per_pass"] == pytest.approx(1.0)


def test_a_passes_last_sync_after_a_real_preemption_longer_than_the_wait_stays_the_passes(
    tmp_path, monkeypatch
):
    """The same loop, the preemption real and longer than the feeder's next batch: a
    real-time process on the training thread's core spins 30 ms before each pass's last
    sync (without CAP_SYS_NICE: a process at the usual priority, the thread at nice 19;
    ``PERFTOP_TEST_NICE=1`` takes that way here), the batch then takes 8 ms (as a test suite on 4 processes of 2 cores once
    preempted rollout_tail_sync.py's thread, 2 syncs of 6 booked in steps). More time off
    the CPU before the sync than after it, but none of it a block of the thread's own: the
    feeder's wait, a block, lies after the sync, which stays the pass's (5 of 6 were booked
    in steps before), though under half the feeder's usual 20 ms (a zoo loop on CI: 3 ms
    after its rollout's sync against a usual 7.5, preemptions in it; 1 of 4 booked in a
    step)."""
    monkeypatch.setenv("PERFTOP_SYNC", "all")
    proc, rep = run_and_report(
        tmp_path, sys.executable, str(WORKLOADS / "rollout_tail_sync.py"), "preempted"
    )
    assert proc.returncode == 0, proc.stderr
    own = json.loads(proc.stdout.strip().splitlines()[-1])
    # the setup held: each sync came after 30 ms switched out (a real-time rival; without
    # CAP_SYS_NICE, the thread at nice 19 beside it), not blocked
    windows = own["windows"]
    assert all(w["off_cpu_s"] > 0.02 and w["blocks"] == 0 for w in windows), own
    assert "passes 6" in proc.stdout and rep["steps"]["count"] == 60
    assert rep["sync_events"] == []
    (site,) = rep["sync_between"]
    assert site["op"] == "float" and site["count"] == 6


def test_syncs_during_an_async_checkpoint_are_the_steps(tmp_path, monkeypatch):
    """Checkpoints written on a thread of their own while the steps go on, each step
    reading its loss: the reads made while a save was being written (18-27 of 60 in a run)
    are the steps' syncs, none is between steps. (The save's end came as an interval of
    the training thread's: the reads still unsent in it, 3 of 18 once, were a pass's.)"""
    monkeypatch.setenv("PERFTOP_SYNC", "all")
    script = WORKLOADS / "sync_async_save.py"
    proc, rep = run_and_report(tmp_path, sys.executable, str(script))
    assert proc.returncode == 0, proc.stderr
    own = job_json(proc.stdout)
    assert own["items_during"] >= 5, own  # the premise: the saves overlapped steps' reads
    between = rep["steps"]["between_s"]
    assert set(between) == {"checkpoint_overlapped"}, between
    assert between["checkpoint_overlapped"]["count"] == own["saves"], between
    (line,) = sites_marked(script)
    (site,) = rep["sync_events"]
    assert (site["line"], site["op"]) == (line, "item")
    # each update's read is in the next step (from its end to the next): the last one's in
    # none, but counted (after the last step)
    assert site["count"] == own["steps"] and site["per_step"] == pytest.approx(1.0), site
    assert rep["sync_between"] == [], rep["sync_between"]
