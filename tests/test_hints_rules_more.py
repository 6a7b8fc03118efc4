"""Every rule fires on a snapshot built to trigger it, stays quiet just under its bar, and
keeps a hint already shown on its looser "stay" bar (hysteresis in the value).

Values are ones a real run produces: GPU rows as NVML reports them (utilization in whole
percent, memory in bytes of an 80 GiB device), host rows as psutil gives them."""

from __future__ import annotations

from dataclasses import replace

from perftop.hints import evaluate
from perftop.model.snapshot import (
    BetweenRow,
    GpuProcRow,
    GpuRow,
    Hint,
    HostRow,
    Loader,
    Meta,
    ProcRow,
    Snapshot,
    StepRow,
    StepStats,
    SyncSite,
    Trainer,
)
from perftop.model.workers import WorkerRow

T0 = 1_700_000_000.0
PID = 100
H100_MEM = 81559 * 2**20  # what NVML reports as total memory of an H100 80GB


def fires(hint_id: str, snap: Snapshot, shown: bool = False) -> bool:
    found, errors = evaluate(snap, frozenset({hint_id}) if shown else frozenset())
    assert not errors
    return hint_id in found


def worker(i: int, busy: float, batch_s: float = 0.1, cpu: float = 0.95) -> WorkerRow:
    return WorkerRow(
        PID + 1 + i, PID, i, 0, T0, T0 + 30, False, 100, 10.0 * busy, 10.0 * busy * cpu,
        batch_s, busy, cpu, busy / batch_s, 3 * 2**20, 1, T0 + 0.5,
    )  # fmt: skip


def snap(
    data: float | list[float] = 0.0,
    compute: float = 0.05,
    n: int = 40,
    nw: int = 2,
    busy: float = 0.5,
    batch_s: float = 0.1,
    host: HostRow | None = None,
    device: str = "cpu",
    gpus: tuple[GpuRow, ...] = (),
    pin: bool = False,
    procs: tuple[ProcRow, ...] = (),
    threads: int = 4,
    cpu: float = 0.95,
) -> Snapshot:
    waits = data if isinstance(data, list) else [data] * n
    rows, t = [], T0
    for i, d in enumerate(waits):
        rows.append(StepRow(PID, i + 1, t, t + d + compute, d, 0.4 * compute, 0.1 * compute,
                            0.5 * compute))  # fmt: skip
        t += d + compute
    pids = tuple((i, PID + 1 + i) for i in range(nw))
    return Snapshot(
        meta=Meta(start_t=T0, now_t=t),
        steps=StepStats(pid=PID, count=len(rows), recent=tuple(rows)),
        trainers=(Trainer(PID, 1, "h", ("train.py",), None, None, None, device, "2.13", threads),),
        loaders=(Loader(PID, 0, nw, 32, pin, 2, False, pids, "Images", T0),),
        host=host or HostRow(cpu_count=8, cpu_percent=40.0),
        workers=tuple(worker(i, busy, batch_s, cpu) for i in range(nw)),
        gpus=gpus,
        processes=procs,
    )


def nvml(index: int, util: float, used: int = 20 * 2**30, pid: int | None = None) -> GpuRow:
    procs = () if pid is None else (GpuProcRow(pid, used - 500 * 2**20, util * 0.8),)
    return GpuRow(index, "NVIDIA H100 80GB HBM3", f"GPU-{index}", util, None, util * 0.6,
                  used, H100_MEM, 310.0, 700.0, 55.0, 1980.0, processes=procs)  # fmt: skip


# --- input pipeline -----------------------------------------------------------------


def test_io_bound_on_iowait_with_hysteresis() -> None:
    def s(iowait: float) -> Snapshot:
        return snap(0.03, host=HostRow(cpu_count=8, cpu_percent=30.0, iowait_percent=iowait))

    assert fires("io-bound", s(35.0))
    assert not fires("io-bound", s(19.0))
    assert fires("io-bound", s(12.0), shown=True)
    assert not fires("io-bound", s(9.0), shown=True)
    # IO is high but the loop does not wait for data: not the bottleneck
    assert not fires("io-bound", replace(s(35.0), steps=snap(0.005).steps))


def test_io_bound_on_worker_reads_names_the_rate() -> None:
    t = T0 + 1.0  # a probe interval that began within the steps (they start at T0)
    reads = tuple(ProcRow(PID + 1 + i, PID, io_read_bps=15 * 2**20, io_since_t=t) for i in range(2))
    found = evaluate(snap(0.03, procs=reads))[0]
    assert "/s from storage" in " ".join(found["io-bound"].evidence)
    assert not fires("io-bound", snap(0.03, procs=reads[:1]))  # 15 MiB/s: under 20


def test_io_bound_counts_only_the_loaders_reads_after_start_up() -> None:
    """The main process's reads beside its workers, and reads from before the steps
    (importing torch), are not the loader's; with no workers the main process's are."""
    main = ProcRow(PID, 1, io_read_bps=40 * 2**20, io_since_t=T0 + 1.0)
    assert not fires("io-bound", snap(0.03, procs=(main,)))  # 2 workers: it does not fetch
    assert fires("io-bound", snap(0.03, nw=0, procs=(main,)))  # no workers: its fetches
    early = replace(main, io_since_t=T0 - 1.0)  # began before the first step: start-up
    assert not fires("io-bound", snap(0.03, nw=0, procs=(early,)))
    w = tuple(ProcRow(PID + 1 + i, PID, io_read_bps=15 * 2**20, io_since_t=T0) for i in range(2))
    assert not fires("io-bound", snap(0.03, procs=w))  # before the workers made a batch


def test_io_bound_reads_a_whole_runs_exited_workers_over_the_steps() -> None:
    """Over a whole run the workers had exited (no last rate): their reads from each one's
    first sample after it made a batch (T0 + 0.5) count; its start-up's before do not."""

    def procs(before: int, per_s: int) -> tuple[ProcRow, ...]:
        marks = ((T0, before), (T0 + 1.0, before), (T0 + 3.0, before + 2 * per_s))
        return tuple(
            ProcRow(PID + 1 + i, PID, alive=False, io_read_bytes=marks[-1][1], io_read_marks=marks)
            for i in range(2)
        )

    found = evaluate(snap(0.03, procs=procs(200 * 2**20, 15 * 2**20)))[0]
    assert "the loader reads 30.0MiB/s from storage" in found["io-bound"].evidence
    assert not fires("io-bound", snap(0.03, procs=procs(200 * 2**20, 0)))  # start-up's only


def test_io_bound_needs_a_busy_disk_that_moves_bytes() -> None:
    """A disk counted busy while no byte was read or written is no evidence (a finished
    job's last sample read 100% busy, 0 B/s); one busy writing is, and says so."""

    def s(read: float, write: float) -> Snapshot:
        host = HostRow(cpu_count=8, cpu_percent=30.0, disk_busy_percent=100.0,
                       disk_read_bps=read, disk_write_bps=write)  # fmt: skip
        return snap(0.03, host=host)

    assert not fires("io-bound", s(0.0, 0.0))
    assert (
        "the disks are 100% busy, reading 8.0MiB/s"
        in evaluate(s(8 * 2**20, 0.0))[0]["io-bound"].evidence
    )
    found = evaluate(s(0.0, 50 * 2**20))[0]["io-bound"]
    assert "the disks are 100% busy, reading 0B/s, writing 50.0MiB/s" in found.evidence


def test_input_bound_with_idle_workers_points_at_moving_batches() -> None:
    h = evaluate(snap(0.05, busy=0.3))[0]["input-bound"]
    assert any("idle 70%" in e for e in h.evidence)
    assert any("pin_memory=True" in a and "/dev/shm" in a for a in h.advice)
    h = evaluate(snap(0.05, busy=0.6))[0]["input-bound"]  # neither idle nor saturated
    assert not any("/dev/shm" in a for a in h.advice)


def test_input_bound_bursts_every_num_workers_steps() -> None:
    waits = [0.2 if i % 4 == 0 else 0.001 for i in range(40)]
    h = evaluate(snap(waits, nw=4, busy=0.6))[0]["input-bound"]
    assert any("bursts" in e and "every ~4 steps (4 workers)" in e for e in h.evidence)
    assert any("cannot keep up" in a for a in h.advice)
    # the same long waits with no period of num_workers: no burst advice
    waits = [0.2 if i % 9 == 0 else 0.001 for i in range(40)]
    h = evaluate(snap(waits, nw=4, busy=0.6))[0].get("input-bound")
    assert h is None or not any("cannot keep up" in a for a in h.advice)


# --- CPU and workers ----------------------------------------------------------------


def _job(main: float, worker: float, nw: int) -> tuple[ProcRow, ...]:
    """The job's processes as the probe sees them: the trainer and its workers' CPU %."""
    workers = tuple(ProcRow(PID + 1 + i, PID, cpu_percent=worker) for i in range(nw))
    return (ProcRow(PID, 1, cpu_percent=main), *workers)


def test_too_many_workers_on_busy_cores() -> None:
    def s(cpu: float, procs: tuple[ProcRow, ...] = _job(100.0, 60.0, 12)) -> Snapshot:
        host = HostRow(cpu_count=8, cpu_percent=cpu)
        return snap(0.0, nw=12, busy=0.9, host=host, procs=procs)

    h = evaluate(s(97.0))[0]["too-many-workers"]
    assert any("at most 7 workers" in a for a in h.advice)
    assert any("the job uses 8.0 cores" in e for e in h.evidence)  # (8.2 measured: at most its 8)
    assert not fires("too-many-workers", s(89.0))
    assert not fires("too-many-workers", replace(s(97.0), loaders=snap(nw=8).loaders))
    # Other jobs fill the host (issue 44: the job's main process at 53%, its workers
    # mostly waiting): nothing about the job's settings; nor where no probe measured it.
    assert not fires("too-many-workers", s(97.0, _job(53.0, 4.0, 12)))
    assert not fires("too-many-workers", s(97.0, ()))


def test_too_many_workers_idle_with_hysteresis() -> None:
    assert fires("too-many-workers", snap(0.0, nw=6, busy=0.1))
    assert not fires("too-many-workers", snap(0.0, nw=6, busy=0.21))
    assert fires("too-many-workers", snap(0.0, nw=6, busy=0.25), shown=True)
    assert not fires("too-many-workers", snap(0.0, nw=6, busy=0.31), shown=True)
    assert not fires("too-many-workers", snap(0.0, nw=3, busy=0.1))  # few workers: fine


def test_cpu_oversubscribed_with_hysteresis() -> None:
    def s(cpu: float, threads: int = 8) -> Snapshot:
        procs = (ProcRow(PID, 1, cpu_percent=600.0),) + tuple(
            ProcRow(PID + 1 + i, PID, cpu_percent=90.0) for i in range(2)
        )
        return snap(0.0, host=HostRow(cpu_count=8, cpu_percent=cpu), procs=procs, threads=threads)

    h = evaluate(s(96.0))[0]["cpu-oversubscribed"]
    assert "10 busy compute threads on 8 cores" in h.evidence[0]
    assert any("set_num_threads(6)" in a for a in h.advice)
    assert not fires("cpu-oversubscribed", s(89.0))
    assert fires("cpu-oversubscribed", s(85.0), shown=True)
    assert not fires("cpu-oversubscribed", s(79.0), shown=True)
    assert not fires("cpu-oversubscribed", s(96.0, threads=6))  # 8 threads on 8 cores
    # the host is busy, but not with this job
    idle_job = replace(s(96.0), processes=(ProcRow(PID, 1, cpu_percent=200.0),))
    assert not fires("cpu-oversubscribed", idle_job)


def test_cpu_oversubscribed_counts_busy_workers_only() -> None:
    """Two torch threads on two cores beside two DataLoader workers: oversubscribed when
    the workers make batches on the CPU, not when they sit idle at 4% each."""

    def s(busy: float) -> Snapshot:
        procs = (ProcRow(PID, 1, cpu_percent=190.0),) + tuple(
            ProcRow(PID + 1 + i, PID, cpu_percent=100.0 * busy) for i in range(2)
        )
        host = HostRow(cpu_count=2, cpu_percent=97.0)
        return snap(0.0, busy=busy, cpu=1.0, host=host, procs=procs, threads=2)

    h = evaluate(s(0.6))[0]["cpu-oversubscribed"]
    assert "4 busy compute threads on 2 cores" in h.evidence[0], h.evidence
    assert not fires("cpu-oversubscribed", s(0.04))  # idle workers: 2 threads on 2 cores
    assert not fires("cpu-oversubscribed", s(0.24))  # just under a busy worker's bar
    # workers that have not reported yet count by the process probe's CPU figure
    unreported = replace(s(0.6), workers=tuple(replace(w, busy_share=None) for w in s(0.6).workers))
    assert fires("cpu-oversubscribed", unreported)
    quiet = replace(s(0.04), workers=tuple(replace(w, busy_share=None) for w in s(0.04).workers))
    assert not fires("cpu-oversubscribed", quiet)


def test_cpu_oversubscribed_shares_the_cores_among_trainers() -> None:
    """Two hogwild trainers with 2 torch threads each on 2 cores: one thread each fits, and
    set_num_threads(2), which each already has, would change nothing."""
    one = snap(0.0, nw=0, host=HostRow(cpu_count=2, cpu_percent=98.0), threads=2)
    t0 = one.trainers[0]
    two = replace(
        one,
        trainers=(t0, replace(t0, pid=PID + 5)),
        processes=(ProcRow(PID, 1, cpu_percent=100.0), ProcRow(PID + 5, 1, cpu_percent=98.0)),
    )
    h = evaluate(two)[0]["cpu-oversubscribed"]
    assert "4 busy compute threads on 2 cores" in h.evidence[0], h.evidence
    assert h.advice == (
        "torch.set_num_threads(1) in each of the 2 training processes: one compute thread a core.",
    )


# --- time outside steps -------------------------------------------------------------


def test_between_steps_with_hysteresis() -> None:
    def s(eval_s: float, wall: float = 100.0) -> Snapshot:
        rows = (
            BetweenRow("eval", eval_s * 0.8, 4, T0 + 50, T0 + 60),
            BetweenRow("checkpoint", eval_s * 0.2, 2, T0 + 70, T0 + 72),
        )
        return Snapshot(meta=Meta(start_t=T0, now_t=T0 + wall), between=rows)

    h = evaluate(s(30.0))[0]["between-steps"]
    assert "mostly evaluation" in h.title and h.est_gain == 0.3
    assert any("inference_mode" in a for a in h.advice)
    assert any("async_save" in a for a in h.advice)
    assert not fires("between-steps", s(19.0))
    assert fires("between-steps", s(17.0), shown=True)
    assert not fires("between-steps", s(14.0), shown=True)
    assert not fires("between-steps", s(4.0, wall=10.0))  # 40% but only 4 s: too early


def test_between_steps_rollouts_name_their_function_not_evaluation() -> None:
    """A rollout row (issue 44 item 2): named, with the function that made it and the share
    inside the model's forward calls; its advice is about that function, with no
    "evaluate less often"."""
    site = "collect_rollouts (on_policy_algorithm.py:202)"
    rows = (BetweenRow("rollout", 40.0, 12, T0 + 50, T0 + 60, site=site, site_s=40.0,
                       forward_s=30.0, measured_s=40.0),)  # fmt: skip
    h = evaluate(Snapshot(meta=Meta(start_t=T0, now_t=T0 + 100), between=rows))[0]
    h = h["between-steps"]
    assert "mostly rollouts" in h.title
    assert f"made from {site}; 75% of it inside the model's forward calls" in h.evidence[0]
    assert any(site in a and "environment" in a for a in h.advice), h.advice
    assert not any("Evaluate less often" in a for a in h.advice)


def test_between_steps_ray_reports_say_what_the_report_waits_for() -> None:
    """Ray Train's report calls (kind ``report``): named as such, with advice about
    reporting (how often, the checkpoint's upload), not about saving or evaluating."""
    rows = (BetweenRow("report", 30.0, 15, T0 + 50, T0 + 60),)
    h = evaluate(Snapshot(meta=Meta(start_t=T0, now_t=T0 + 100), between=rows))[0]
    h = h["between-steps"]
    assert "mostly Ray Train's reports" in h.title, h.title
    assert h.evidence[0].startswith("Ray Train's reports: 30.00s in 15 intervals"), h.evidence
    assert any("report less often" in a and "ASYNC" in a for a in h.advice), h.advice
    assert not any("Evaluate less often" in a or "Save less often" in a for a in h.advice)


# --- GPU ----------------------------------------------------------------------------


def test_gpu_underutilized_with_hysteresis() -> None:
    def s(util: float, data: float = 0.002) -> Snapshot:
        return snap(data, device="cuda:0", gpus=(nvml(0, util),), pin=True)

    h = evaluate(s(30.0))[0]["gpu-underutilized"]
    assert "GPU 0 busy 30%" in h.evidence[0] and h.est_gain == 0.7
    assert not fires("gpu-underutilized", s(50.0))
    assert fires("gpu-underutilized", s(55.0), shown=True)
    assert not fires("gpu-underutilized", s(60.0), shown=True)
    assert not fires("gpu-underutilized", s(30.0, data=0.02))  # the input explains it
    cpu_job = replace(s(30.0), trainers=snap().trainers)
    assert not fires("gpu-underutilized", cpu_job)  # another job's GPU


def test_gpu_underutilized_prefers_cuda_event_timing() -> None:
    s = snap(0.002, device="cuda:0", gpus=(nvml(0, 95.0),), pin=True)
    timed = replace(s, steps=replace(s.steps, gpu_p50=0.02, p50=0.052))
    h = evaluate(timed)[0]["gpu-underutilized"]
    assert "GPU time per step" in h.evidence[0]
    assert not fires("gpu-bound", timed)


def test_gpu_memory_pressure_with_hysteresis() -> None:
    def s(share: float) -> Snapshot:
        return Snapshot(gpus=(nvml(0, 80.0, int(share * H100_MEM)), nvml(1, 80.0)))

    h = evaluate(s(0.97))[0]["gpu-memory-pressure"]
    assert len(h.evidence) == 1 and h.evidence[0].startswith("GPU 0 memory")
    assert not fires("gpu-memory-pressure", s(0.94))
    assert fires("gpu-memory-pressure", s(0.93), shown=True)
    assert not fires("gpu-memory-pressure", s(0.91), shown=True)
    assert not fires("gpu-memory-pressure", Snapshot(gpus=(GpuRow(0),)))  # NVML gave N/A


def test_gpu_bound_with_hysteresis() -> None:
    def s(util: float, data: float = 0.002) -> Snapshot:
        return snap(data, device="cuda:0", gpus=(nvml(0, util),), pin=True)

    assert evaluate(s(98.0))[0]["gpu-bound"].severity == "info"
    assert not fires("gpu-bound", s(89.0))
    assert fires("gpu-bound", s(87.0), shown=True)
    assert not fires("gpu-bound", s(84.0), shown=True)
    assert not fires("gpu-bound", s(98.0, data=0.006))  # 10.7% data wait
    assert not fires("input-bound", s(98.0, data=0.03))  # a saturated GPU is the limit


def test_pageable_copy_from_sites_and_unpinned_loaders() -> None:
    site = SyncSite("pageable_copy", "/x/train.py", 77, "step", "potential", 40, 1.0)
    cuda = snap(device="cuda:0", gpus=(nvml(0, 60.0),), pin=True)
    h = evaluate(replace(cuda, sync=(site,)))[0]["pageable-copy"]
    assert "train.py:77" in h.evidence[0] and h.severity == "medium"
    assert not fires("pageable-copy", cuda)  # pinned, no pageable copies
    unpinned = snap(device="cuda:0", gpus=(nvml(0, 60.0),), pin=False)
    assert evaluate(unpinned)[0]["pageable-copy"].severity == "info"
    assert not fires("pageable-copy", snap(pin=False))  # CPU training: pinning is moot


# --- ranks and GPUs -------------------------------------------------------------------


def rank(r: int, own: float, bwd: float) -> StepStats:
    return StepStats(pid=PID + r, rank=r, count=50, p50=own + bwd, own_p50=own,
                     phase_p50={"backward": bwd, "data": 0.005})  # fmt: skip


def ddp(extra: float) -> Snapshot:
    """Four DDP ranks: rank 2 does ``extra`` more own work, the others wait for it in
    backward's all-reduce, so every step takes the same time."""
    own, bwd = 0.1, 0.08
    ranks = tuple(
        rank(r, own + extra, bwd) if r == 2 else rank(r, own, bwd + extra) for r in range(4)
    )
    return Snapshot(ranks=ranks)


def test_straggler_with_hysteresis() -> None:
    h = evaluate(ddp(0.03))[0]["straggler"]  # 14% of a 0.21 s step
    assert "rank 2" in h.title and h.est_gain is not None and 0.1 < h.est_gain < 0.2
    assert not fires("straggler", ddp(0.019))  # 9.5%
    assert fires("straggler", ddp(0.019), shown=True)
    assert not fires("straggler", ddp(0.013), shown=True)  # 6.7%
    # ranks that differ without waiting for each other (no DDP) are not stragglers
    free = tuple(rank(r, 0.1 + (0.03 if r == 2 else 0.0), 0.08) for r in range(4))
    assert not fires("straggler", Snapshot(ranks=free))


def test_gpu_imbalance_with_hysteresis() -> None:
    def s(lo: float) -> Snapshot:
        return Snapshot(gpus=(nvml(0, 95.0), nvml(1, lo), nvml(2, 94.0)))

    h = evaluate(s(40.0))[0]["gpu-imbalance"]
    assert "GPU 1 is busy 40%" in h.title and h.est_gain == 0.55
    assert not fires("gpu-imbalance", s(66.0))
    assert fires("gpu-imbalance", s(70.0), shown=True)
    assert not fires("gpu-imbalance", s(76.0), shown=True)
    assert not fires("gpu-imbalance", Snapshot(gpus=(nvml(0, 95.0),)))


def test_gpu_rules_look_only_at_the_jobs_gpus() -> None:
    """NVML lists every GPU of the host: another job's GPUs (their processes are not ours)
    must not raise an imbalance, hide an input bottleneck, or count as this job's."""
    other = 4242
    # this job on GPUs 0 and 1, another job idles GPU 2 and fills GPU 3
    gpus = (nvml(0, 95.0, pid=PID), nvml(1, 94.0, pid=PID), nvml(2, 3.0, pid=other),
            nvml(3, 99.0, int(0.99 * H100_MEM), pid=other))  # fmt: skip
    s = snap(0.03, device="cuda:0", gpus=gpus, pin=True, procs=(ProcRow(PID, 1),))
    assert not fires("gpu-imbalance", s)
    assert not fires("gpu-memory-pressure", s)
    idle_here = replace(s, gpus=(nvml(0, 40.0, pid=PID), gpus[3]))
    assert fires("input-bound", idle_here)  # GPU 3 is busy, but not with this job
    assert fires("gpu-imbalance", replace(s, gpus=(*gpus[:1], nvml(1, 40.0, pid=PID))))
    # no device lists the job's pids (a container's own pid numbers): every device counts
    assert fires("gpu-imbalance", replace(s, gpus=(nvml(0, 95.0), nvml(1, 40.0))))


def test_input_bound_estimates_the_advised_workers_gain() -> None:
    """num_workers=0 on 2 cores: one worker is advised, and it makes a batch as slowly as
    the loop did, so the step shrinks only by the loop's own compute (not the 89% wait)."""
    two = snap(0.0068, 0.0008, nw=0, host=HostRow(cpu_count=2, cpu_percent=60.0))
    h = evaluate(two)[0]["input-bound"]
    assert any("num_workers=1" in a for a in h.advice)
    assert h.est_gain is not None and 0.09 < h.est_gain < 0.12, h.est_gain
    assert h.est_gain_text.startswith("up to 11% of step time with num_workers=1")
    eight = evaluate(snap(0.0068, 0.0008, nw=0))[0]["input-bound"]  # 7 workers on 8 cores
    assert eight.est_gain is not None and 0.8 < eight.est_gain < 0.89
    # no count to advise (the CPU is the limit): the whole data wait, as a bound
    busy = snap(0.03, busy=0.95, host=HostRow(cpu_count=8, cpu_percent=97.0))
    h = evaluate(busy)[0]["input-bound"]
    assert h.est_gain == round(h.est_gain, 4) and "if every batch were ready" in h.est_gain_text


def test_input_bound_raises_waiting_workers_on_a_busy_host_only_when_they_fit() -> None:
    """Workers that wait off the CPU (storage) gain from more of them even on a busy
    host; workers that need half a core each would only take turns on busy cores."""
    host = HostRow(cpu_count=2, cpu_percent=97.0)
    waiting = evaluate(snap(0.03, busy=0.95, batch_s=0.3, cpu=0.05, host=host))[0]
    waiting = waiting["input-bound"]  # 7 workers would keep up, 5 more at 5% CPU each
    assert any("Raise num_workers from 2 to about 7" in a for a in waiting.advice)
    assert "with num_workers=" in waiting.est_gain_text
    cpu_bound = evaluate(snap(0.03, busy=0.95, batch_s=0.3, cpu=0.45, host=host))[0]
    cpu_bound = cpu_bound["input-bound"]  # 5 more at 45% CPU: 2.25 cores, none idle
    assert not any("Raise num_workers" in a for a in cpu_bound.advice)
    assert any("The CPU is the limit" in a for a in cpu_bound.advice)
    assert "if every batch were ready" in cpu_bound.est_gain_text


def test_input_bound_tells_a_wait_for_a_core_from_a_read_where_it_was_measured() -> None:
    """Workers 95% busy, on the CPU 15% of each batch, on 2 busy cores. Their measured
    run-queue delay (the process probe's) says what the rest is: where it is a wait for a
    core, more workers would take turns on the same cores (a loaded host's demo was told
    "about 10 workers would keep up (they wait off the CPU most of each batch: no core
    each needed)" beside "the workers wait for a free core 53%"); where it is not, they
    wait for reads and more of them overlap it."""
    host = HostRow(cpu_count=2, cpu_percent=97.0)

    def hint(core_wait: float) -> Hint:
        procs = (ProcRow(PID, 1, cpu_percent=30.0),) + tuple(
            ProcRow(PID + 1 + i, PID, cpu_percent=14.0, core_wait_share=core_wait) for i in range(2)
        )
        s = snap(0.03, busy=0.95, batch_s=0.3, cpu=0.15, host=host, procs=procs)
        return evaluate(s)[0]["input-bound"]

    queued = hint(0.6)  # 0.6 of wall time: 63% of their batch time, of 85% off the CPU
    text = " ".join(queued.evidence)
    assert "no core each needed" not in text and ", each with a core of its own" in text
    assert "the workers wait for a free core 63% of each batch's time" in text, text
    assert "file reads" not in text, text
    assert not any("Raise num_workers" in a for a in queued.advice), queued.advice
    assert any("The CPU is the limit" in a for a in queued.advice)
    reading = hint(0.02)  # 2% of wall time: the rest of their 85% off the CPU is reads
    text = " ".join(reading.evidence)
    assert "no core each needed" in text and "wait for a free core" not in text, text
    assert "the workers spend 83% of each batch off the CPU, waiting (file reads" in text
    assert any("Raise num_workers from 2 to about" in a for a in reading.advice)


def test_host_device_sync_counts_in_step_syncs_and_names_between_step_ones_apart() -> None:
    """A sampling pass between steps that syncs 500 times (3 passes) raises nothing by
    itself; beside in-step syncs, it is named apart and not counted. The model keeps such
    sites apart (``Snapshot.sync_between``, counted per pass)."""
    sample = SyncSite("item", "/x/sample.py", 12, "sample", "potential", 1500, 0.0,
                      per_pass=500.0, passes=3)  # fmt: skip
    assert not fires("host-device-sync", replace(snap(0.0), sync_between=(sample,)))
    step = SyncSite("nonzero", "/x/loss.py", 41, "loss", "potential", 300, 1.2)
    h = evaluate(replace(snap(0.0), sync=(step,), sync_between=(sample,)))[0]["host-device-sync"]
    assert h.evidence[0].startswith("1.2 host-device syncs per step at 1 line")
    assert any("between steps (not counted above): sample.py:12 item, 1500 syncs, 500 per pass"
               in e for e in h.evidence), h.evidence  # fmt: skip


def test_cpu_oversubscribed_by_torch_threads_alone_advises_a_thread_a_core() -> None:
    """4 torch threads in a process busy on 2 cores, its 2 workers idle: the advice is a
    thread a core, with nothing said of busy workers it did not count."""
    procs = (ProcRow(PID, 1, cpu_percent=190.0),) + tuple(
        ProcRow(PID + 1 + i, PID, cpu_percent=4.0) for i in range(2)
    )
    s = snap(0.0, busy=0.04, host=HostRow(cpu_count=2, cpu_percent=97.0), procs=procs, threads=4)
    h = evaluate(s)[0]["cpu-oversubscribed"]
    assert "4 busy compute threads on 2 cores" in h.evidence[0], h.evidence
    assert h.advice == (
        "torch.set_num_threads(2) in the training process: one compute thread a core.",
    )


def test_host_device_sync_tells_two_library_sites_behind_one_user_line_apart() -> None:
    """Two syncs inside ``trainer.train()``: one user line, two library lines (a real HF
    Trainer run's), each named by the library line it went through."""
    lib = "/venv/lib/python3.11/site-packages/transformers/"
    sites = tuple(
        SyncSite(
            "bool",
            "/x/train.py",
            50,
            "<module>",
            "potential",
            n,
            rate,
            lib_file=lib + f,
            lib_line=ln,
            lib_function="f",
            package="transformers",
        )  # fmt: skip
        for f, ln, n, rate in (("trainer.py", 1919, 680, 8.5), ("masking_utils.py", 761, 340, 4.3))
    )
    h = evaluate(replace(snap(0.0), sync=sites))[0]["host-device-sync"]
    text = " ".join(h.evidence + h.advice)
    assert "train.py:50 (via transformers/trainer.py:1919) bool" in text, text
    assert "train.py:50 (via transformers/masking_utils.py:761) bool" in text, text


def test_host_device_sync_gives_no_rate_while_its_error_is_as_large() -> None:
    """The demo's first minute: four lines seen in each of the 5 steps watched so far, each
    rate's error about its value, so the Sync panel says "5/5 watched" and no rate; the
    hint said "4.2 ±4.9 per step". With more steps watched, the rate and its error."""

    def site(line: int, per_step: float, error: float, watched: int, seen: int, every: bool):
        return SyncSite("nonzero", "/x/loss.py", line, "loss", "potential", seen, per_step,
                        watched=watched, error=error, seen=seen, every_step=every)  # fmt: skip

    early = tuple(site(n, 1.0, 1.1, 5, 5, False) for n in (41, 42, 43, 44))
    h = evaluate(replace(snap(0.0), sync=(*early, site(50, 0.2, 0.45, 5, 1, False))))[0]
    h = h["host-device-sync"]
    assert h.title == "Host-device syncs at 5 lines would stall a GPU", h.title
    assert h.evidence[0].startswith(
        "host-device syncs at 5 lines in the 5 steps watched: too few for a rate per step"
    ), h.evidence
    assert "±" not in h.title + h.evidence[0]
    assert any("in 5 of 5 watched steps" in e for e in h.evidence), h.evidence
    later = tuple(site(n, 1.0, 0.29, 6, 6, True) for n in (41, 42, 43, 44))
    h = evaluate(replace(snap(0.0), sync=later))[0]["host-device-sync"]
    assert h.title == "Host-device syncs: 4.0 ±1.2 per step would stall a GPU", h.title
    # tianshou's DQN: two lines in each of 5 watched steps, too few drawn to say "every
    # step", their errors under their rates: each row gives no rate, nor does their sum
    # (it read "2.0 ±1.2 per step", and "2.0 ±2.0" where the errors rounded up to it)
    for err in (0.6, 0.996):
        pair = tuple(site(n, 1.0, err, 5, 5, False) for n in (41, 42))
        h = evaluate(replace(snap(0.0), sync=pair))[0]["host-device-sync"]
        assert h.title == "Host-device syncs at 2 lines would stall a GPU", (err, h.title)


def test_input_bound_says_what_the_workers_that_keep_up_need_where_the_idle_cores_fall_short() -> (
    None
):
    """Two workers busy 98%, on the CPU, on a 2-core host 83% busy: 7 would keep up, and
    the 5 more need about 4.9 cores where 0.3 are idle. The advice said "Raise num_workers
    from 2 to more" beside "the host has idle cores", with no count and no cost; it says
    how far the idle cores go and what the count that keeps up would need, and no count
    is advised (none is measured to fit)."""
    host = HostRow(cpu_count=2, cpu_percent=83.0)
    procs = (ProcRow(PID, 1, cpu_percent=30.0),) + tuple(
        ProcRow(PID + 1 + i, PID, cpu_percent=96.0) for i in range(2)
    )
    s = snap(0.2, busy=0.98, batch_s=0.3, cpu=0.98, host=host, procs=procs)
    h = evaluate(s)[0]["input-bound"]
    text = " ".join(h.advice)
    assert "to more" not in text, text
    said = (
        "Raise num_workers from 2 only as far as the idle cores go: about 7 would keep up, "
        "and their 5 more need about 4.9 cores where the host has 0.3 idle."
    )
    assert said in text, text
    assert "make each batch cheaper" in text
    # idle cores that hold the added workers: the count, as before
    roomy = snap(
        0.2, busy=0.98, batch_s=0.3, cpu=0.98, host=HostRow(cpu_count=16, cpu_percent=20.0)
    )
    advice = evaluate(roomy)[0]["input-bound"].advice
    assert any("Raise num_workers from 2 to about 7: the workers are busy 98%" in a for a in advice)


def test_one_worker_is_one_in_the_words() -> None:
    """A loader of one worker (accelerate's example: num_workers=1) read "1 worker make ...
    together" and "the workers are idle": its evidence speaks of one."""
    one = evaluate(snap(0.05, busy=0.3, nw=1))[0]["input-bound"]
    assert any(
        e.startswith("1 worker makes 10.0 batches/s (100ms per batch, busy 30%")
        for e in one.evidence
    ), one.evidence
    assert any(e.startswith("the worker is idle 70% of the time") for e in one.evidence), (
        one.evidence
    )
    two = evaluate(snap(0.05, busy=0.3, nw=2))[0]["input-bound"]
    assert any(
        e.startswith("2 workers make 20.0 batches/s together (100ms per batch each")
        for e in two.evidence
    ), two.evidence
    assert any(e.startswith("the workers are idle 70%") for e in two.evidence), two.evidence
    slow = evaluate(snap(0.05, busy=0.97, nw=1, cpu=0.3))[0]["input-bound"]
    assert any(e.startswith("the worker spends ") for e in slow.evidence), slow.evidence
