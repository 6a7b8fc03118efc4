"""Deterministic snapshots for TUI tests: real model types, made-up but plausible data.

Times are fixed (``T0``), so elapsed time and every figure render the same on every run.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

from perftop.hints import evaluate, order
from perftop.model.snapshot import (
    GpuProcRow,
    GpuRow,
    HostRow,
    Loader,
    Meta,
    NoteRow,
    OutputLine,
    ProcessRole,
    ProcRow,
    Snapshot,
    StepRow,
    StepStats,
    SyncSite,
    Trainer,
)

T0 = 1_700_000_000.0
MAIN = 4242
WORKERS = tuple(range(5000, 5004))


def step_rows(n: int = 120, stall_every: int = 37) -> tuple[StepRow, ...]:
    rows, t = [], T0
    for i in range(n):
        data = 0.004 + 0.002 * math.sin(i / 5) ** 2
        if stall_every and i % stall_every == stall_every - 1:
            data = 0.25  # a worker fell behind: a stall
        fwd, bwd, opt = 0.018, 0.030, 0.006
        d = data + fwd + bwd + opt
        rows.append(StepRow(MAIN, i, t, t + d, data, bwd, opt, fwd, None))
        t += d
    return tuple(rows)


def snapshot(*, steps: int = 120, gpus: bool = True, output_lines: int = 30) -> Snapshot:
    rows = step_rows(steps)
    stats = StepStats(
        pid=MAIN,
        count=1234 + steps,
        steps_per_s=16.4,
        p50=0.0581,
        p95=0.0712,
        max=0.304,
        phase_p50={"data": 0.005, "forward/other": 0.018, "backward": 0.030, "optimizer": 0.006},
        data_wait_fraction=0.18,
        gpu_p50=0.047 if gpus else None,
        last_t=rows[-1].t1 if rows else None,
        recent=rows,
    )
    roles = (ProcessRole(MAIN, "main"),) + tuple(
        ProcessRole(pid, "worker", worker_id=i, loader_id=0, parent_pid=MAIN)
        for i, pid in enumerate(WORKERS)
    )
    procs = (
        ProcRow(
            MAIN,
            name="python",
            cpu_percent=97.5,
            rss_bytes=3_200_000_000,
            uss_bytes=2_900_000_000,
            pss_bytes=3_000_000_000,
            io_read_bps=0.0,
            io_write_bps=12_000.0,
            threads=12,
        ),
    ) + tuple(
        ProcRow(
            pid,
            ppid=MAIN,
            name="pt_data_worker",
            cpu_percent=40.0 + 10 * i,
            rss_bytes=900_000_000,
            uss_bytes=120_000_000 + i * 1_000_000,
            pss_bytes=None if i == 3 else 400_000_000,
            io_read_bps=2_500_000.0 * (i + 1),
            io_write_bps=0.0,
        )
        for i, pid in enumerate(WORKERS)
    )
    gpu_rows = (
        (
            GpuRow(
                0,
                "NVIDIA H100 80GB HBM3",
                util_percent=62.0,
                mem_used_bytes=41 * 2**30,
                mem_total_bytes=80 * 2**30,
                power_w=412.0,
                power_limit_w=700.0,
                temperature_c=61.0,
                sm_clock_mhz=1980.0,
                pcie_rx_bps=1.2e9,
                pcie_tx_bps=3.1e8,
                processes=(GpuProcRow(MAIN, 40 * 2**30),),
            ),
            GpuRow(
                1,
                "NVIDIA H100 80GB HBM3",
                util_percent=None,
                mem_used_bytes=None,
                mem_total_bytes=80 * 2**30,
                temperature_c=88.0,
            ),
        )
        if gpus
        else ()
    )
    host = HostRow(
        t=T0 + 60,
        cpu_count=16,
        cpu_percent=48.0,
        per_core=tuple(float((i * 37) % 100) for i in range(16)),
        iowait_percent=3.5,
        load=(7.9, 6.2, 4.0),
        mem_total_bytes=64 * 2**30,
        mem_used_bytes=22 * 2**30,
        swap_used_bytes=0,
        disk_read_bps=48e6,
        disk_write_bps=1.5e6,
        net_rx_bps=2.0e5,
        net_tx_bps=1.1e5,
        shm_used_bytes=512 * 2**20,
    )
    # A CUDA run: real syncs counted every step by the debug mode; the host time blocked
    # per watched step measured by the sampled detector (host time inside the call); a
    # potential site on host tensors has nothing to wait for, so nothing measured.
    lib = "/home/u/.venv/lib/python3.11/site-packages/transformers/trainer.py"
    via = (lib, 1911, "_run_epoch", "transformers")  # the user's line went through this
    sync = (
        SyncSite("item", "/home/u/train.py", 88, "train", "sync", 1354, 1.0, 0.0142, 1353),
        SyncSite("nonzero", "/home/u/model.py", 41, "forward", "sync", 677, 0.5, 0.0021),
        SyncSite("item", "/home/u/train.py", 52, "main", "sync", 27, 0.02, None, 1350, *via),
        SyncSite("cpu", "/home/u/train.py", 95, "train", "potential", 12, 0.01, None),
    )
    out = tuple(
        OutputLine(
            T0 + i,
            "stderr" if i % 10 == 9 else "stdout",
            f"epoch 0 step {i * 10:>5}  loss {2.5 / (1 + i / 10):.4f}"
            if i % 10 != 9
            else "UserWarning: this is a warning on stderr",
        )
        for i in range(output_lines)
    )
    meta = Meta(
        command=("python", "train.py", "--epochs", "3"),
        cwd="/home/u",
        host="box",
        start_t=T0,
        now_t=T0 + 83.4,
        job_pid=MAIN,
        record_path="run.perftop",
        dropped_events=0,
        monitor_cpu_percent=1.3,
    )
    snap = Snapshot(
        meta=meta,
        steps=stats,
        ranks=(stats,),
        trainers=(Trainer(MAIN, 1, "box", ("train.py",), None, None, None, "cuda:0", "2.4"),),
        loaders=(
            Loader(MAIN, 0, 4, 64, True, 2, False, tuple(enumerate(WORKERS)), "ImageFolder", T0),
        ),
        roles=roles,
        processes=procs,
        host=host,
        gpus=gpu_rows,
        gpu_note="" if gpus else "no GPU (NVML not found)",
        sync=sync,
        output=out,
        output_total=len(out),
        notes=(NoteRow(T0, "warning", "probe", "PSS needs permission for 1 process"),),
        events=99_999,
    )
    return dataclasses.replace(snap, hints=order(list(evaluate(snap)[0].values())))


class FakeSource:
    """Posts snapshots to an app from its own thread, like the ingest thread does."""

    def __init__(self, app, snaps) -> None:
        import threading

        self.app, self.snaps = app, list(snaps)
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        from perftop.tui.messages import SnapshotMessage

        for snap in self.snaps:
            self.app.post_message(SnapshotMessage(snap))

    def start(self) -> FakeSource:
        self.thread.start()
        return self


class FakeController:
    """Stands in for the live job: records what the app asked of it."""

    def __init__(self, running: bool = True) -> None:
        self.is_running = running
        self.toggles = 0

    def running(self) -> bool:
        return self.is_running

    def toggle_recording(self) -> str | None:
        self.toggles += 1
        return "perftop-test.perftop" if self.toggles % 2 else None

    def capture(self, steps: int, tell: Callable[[str, bool], object]) -> str:
        tell(f"asked for {steps} steps", False)
        return "capturing"


# A capture of 3 steps of the fake job above (forward 18 ms, backward 30 ms, optimizer 6 ms
# a step), its ops of the sizes a real torch.profiler capture of such a model gives.
_USER = "/home/u/train.py"
FAKE_OPS = (
    ("aten::mm", "backward", 6.0, 0.0195, 0.0, "[256, 4096], [4096, 1024]", _USER, 71, "train"),
    ("aten::addmm", "forward", 3.0, 0.0112, 0.0, "[4096], [256, 1024], [1024, 4096]", _USER, 64, "train"),
    ("aten::gelu_backward", "backward", 1.0, 0.0032, 0.0, "[256, 4096], [256, 4096]", _USER, 71, "train"),
    ("aten::_foreach_addcdiv_", "optimizer", 1.0, 0.0024, 0.0, "", _USER, 73, "train"),
    ("aten::copy_", "data", 2.0, 0.0022, 0.0, "[256, 3, 64, 64], [256, 3, 64, 64]", _USER, 60, "train"),
    ("aten::gelu", "forward", 1.0, 0.0021, 0.0, "[256, 4096]", _USER, 64, "train"),
    ("aten::native_layer_norm_backward", "backward", 2.0, 0.0020, 0.0, "[256, 1024], [1024]", _USER, 71, "train"),
    ("aten::_foreach_mul_", "optimizer", 2.0, 0.0015, 0.0, "", _USER, 73, "train"),
    ("aten::native_layer_norm", "forward", 2.0, 0.0014, 0.0, "[256, 1024], [1024]", _USER, 64, "train"),
    ("aten::stack", "data", 1.0, 0.0011, 0.0, "", "", 0, ""),
    ("aten::sum", "backward", 3.0, 0.0011, 0.0, "[256, 10]", _USER, 71, "train"),
    ("aten::_log_softmax", "forward", 1.0, 0.0006, 0.0, "[256, 10]", _USER, 65, "train"),
)  # fmt: skip


def capture_events(state: str = "done", first: int = 1351) -> list:
    from perftop.events import CaptureAsk, CaptureOps, CaptureState

    t = T0 + 80.0
    out: list = [CaptureAsk(t, "c1", 3, "run.", "tui"), CaptureState(t, 0, "c1", "asked", steps=3)]
    if state in ("started", "done", "refused-after"):
        out.append(CaptureState(t + 0.1, MAIN, "c1", "started", first_step=first, steps=3))
    if state in ("done", "refused-after"):
        phases = {"data": 0.0052, "forward": 0.0183, "backward": 0.0301, "optimizer": 0.0061}
        out.append(
            CaptureOps(
                t + 0.3,
                MAIN,
                "c1",
                first,
                3,
                0.0613,
                0.0581,
                {**phases, "between": 0.0},
                FAKE_OPS,
                41,
                None,
                "/home/u/run.4242.trace.json",
                1.0e15,
            )  # fmt: skip
        )
    if state == "refused":
        out.append(CaptureState(t + 0.1, MAIN, "c1", "refused", "torch.compile is compiling"))
    if state == "refused-after":
        out.append(CaptureAsk(t + 2, "c2", 3, "run.", "tui"))
        out.append(
            CaptureState(t + 2.1, MAIN, "c2", "refused", "the job runs a profiler of its own")
        )
    return out


def with_capture(snap: Snapshot, state: str = "done") -> Snapshot:
    """``snap`` with a capture folded in by the real model (and its hints evaluated again)."""
    from perftop.model.capture import CaptureReducer

    r = CaptureReducer()
    for ev in capture_events(state):
        r.apply(ev)
    parts: dict = {}
    r.contribute(parts, None)
    snap = dataclasses.replace(snap, **parts)
    return dataclasses.replace(snap, hints=order(list(evaluate(snap)[0].values())))
