"""The GPU's side: ``gpu-underutilized`` (idle without an input bottleneck),
``gpu-memory-pressure``, ``gpu-bound`` (informational: the GPU is the limit) and
``pageable-copy`` (host-to-device copies that cannot overlap)."""

from __future__ import annotations

from perftop.hints.base import fraction, job_gpus, loop, nbytes, seconds, threshold
from perftop.hints.sync import where
from perftop.model.snapshot import GpuRow, Hint, Snapshot

LOW_UTIL, LOW_UTIL_STAY = 50.0, 60.0
HIGH_UTIL, HIGH_UTIL_STAY = 90.0, 85.0
MEM_FULL, MEM_FULL_STAY = 0.95, 0.92
INPUT_QUIET = 0.15  # data wait below this share leaves the GPU's idling unexplained


def _cuda(snap: Snapshot) -> bool:
    return any(t.device.startswith("cuda") for t in snap.trainers)


def _util(snap: Snapshot) -> tuple[float | None, str]:
    """How busy the GPU is: the measured GPU time per step against the step (CUDA events),
    else NVML's utilization of the busiest device."""
    s = snap.steps
    if s.gpu_p50 is not None and s.p50:
        return min(100.0, 100.0 * s.gpu_p50 / s.p50), (
            f"GPU time per step {seconds(s.gpu_p50)} of a {seconds(s.p50)} step (median)"
        )
    rows = [g for g in job_gpus(snap) if g.util_percent is not None]
    if not rows:
        return None, ""
    g = max(rows, key=lambda g: g.util_percent or 0.0)
    return g.util_percent, f"GPU {g.index} busy {g.util_percent:.0f}% of the time (NVML)"


def gpu_underutilized(snap: Snapshot, active: frozenset[str]) -> list[Hint]:
    lp = loop(snap)
    if lp is None or not _cuda(snap) or lp.data_share >= INPUT_QUIET:
        return []
    util, how = _util(snap)
    if util is None or util >= threshold("gpu-underutilized", active, LOW_UTIL, LOW_UTIL_STAY):
        return []
    idle = 1 - util / 100.0
    ev = [how, f"data wait is only {fraction(lp.data_share)} of step time: not the input"]
    syncs = [s for s in snap.sync if s.kind == "sync" and s.per_step >= 0.5]
    if syncs:
        ev.append(
            f"{sum(s.per_step for s in syncs):.1f} host-device syncs per step "
            f"(first: {where(syncs[0])} {syncs[0].op})"
        )
    ld = lp.loader
    if ld is not None and ld.batch_size:
        ev.append(f"batch size {ld.batch_size}, step {seconds(lp.step_s)}")
    return [
        Hint(
            id="gpu-underutilized",
            severity="medium",
            title=f"GPU underused: idle {fraction(idle)} of the time, and not for lack of data",
            evidence=tuple(ev),
            advice=(
                "A larger batch gives each kernel more work (scale the learning rate with it).",
                "Short kernels launched from Python: torch.compile, or CUDA graphs "
                "(torch.compile(mode='reduce-overhead')), cut launch overhead.",
                "Remove host-device syncs (the Sync panel) so the host runs ahead of the GPU.",
            ),
            est_gain=round(idle, 4),
            est_gain_text=f"up to {fraction(idle)} of step time, the GPU's idle share",
            panel="gpu",
        )
    ]


def gpu_memory_pressure(snap: Snapshot, active: frozenset[str]) -> list[Hint]:
    bar = threshold("gpu-memory-pressure", active, MEM_FULL, MEM_FULL_STAY)
    full = [g for g in job_gpus(snap) if _mem_share(g) is not None and (_mem_share(g) or 0) >= bar]
    if not full:
        return []
    ev = [
        f"GPU {g.index} memory {nbytes(g.mem_used_bytes)} of {nbytes(g.mem_total_bytes)} "
        f"({fraction(_mem_share(g))})"
        for g in full
    ]
    return [
        Hint(
            id="gpu-memory-pressure",
            severity="medium",
            title="GPU memory nearly full: the allocator may be freeing and retrying",
            evidence=tuple(ev),
            advice=(
                "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True reduces fragmentation.",
                "Mixed precision (torch.autocast), activation checkpointing or a smaller "
                "batch leave headroom.",
            ),
            est_gain=None,
            est_gain_text="not measurable: an out-of-memory risk, and allocator retries",
            panel="gpu",
        )
    ]


def _mem_share(g: GpuRow) -> float | None:
    if g.mem_used_bytes is None or not g.mem_total_bytes:
        return None
    return g.mem_used_bytes / g.mem_total_bytes


def gpu_bound(snap: Snapshot, active: frozenset[str]) -> list[Hint]:
    lp = loop(snap)
    if lp is None or not _cuda(snap) or lp.data_share >= 0.10:
        return []
    util, how = _util(snap)
    if util is None or util < threshold("gpu-bound", active, HIGH_UTIL, HIGH_UTIL_STAY):
        return []
    return [
        Hint(
            id="gpu-bound",
            severity="info",
            title="GPU-bound: the GPU is the limit, the rest keeps up",
            evidence=(how, f"data wait {fraction(lp.data_share)} of step time"),
            advice=(
                "Mixed precision (torch.autocast with bfloat16) and channels_last for "
                "convolutions do more per second on tensor cores.",
                "A larger batch, if memory allows, uses the GPU better.",
                "Overlap work: independent sub-graphs (a frozen encoder, GPU-side "
                "augmentation) can run on their own CUDA streams.",
            ),
            est_gain=None,
            est_gain_text="depends on the model: the GPU's own speed",
            panel="gpu",
        )
    ]


def pageable_copy(snap: Snapshot, active: frozenset[str]) -> list[Hint]:
    sites = [s for s in snap.sync if s.op == "pageable_copy"]
    unpinned = [ld for ld in snap.loaders if not ld.pin_memory] if _cuda(snap) else []
    if not sites and not unpinned:
        return []
    ev = [f"{where(s)}: non_blocking copy from unpinned memory, {s.per_step:.1f}/step"
          for s in sites[:3]]  # fmt: skip
    ev += [
        f"DataLoader ({ld.dataset}) pin_memory=False while training on CUDA" for ld in unpinned[:2]
    ]
    return [
        Hint(
            id="pageable-copy",
            severity="medium" if sites else "info",
            title="Pageable host-to-device copies: the copy cannot overlap with compute",
            evidence=tuple(ev),
            advice=(
                "DataLoader(..., pin_memory=True) and batch.to(device, non_blocking=True).",
                "For your own tensors: tensor.pin_memory() once, then non_blocking copies.",
            ),
            est_gain=None,
            est_gain_text="not measured: the copy time is not timed separately",
            panel="sync" if sites else "steps",
        )
    ]
