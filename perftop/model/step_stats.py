"""A process's step figures from its :class:`~perftop.model.steps.StepSeries`: over the
live window (exact, from the ring) or the whole run (from the sketches once the run no
longer fits in the ring). Apart from the series so that adding a step stays in a module
of its own."""

from __future__ import annotations

from collections.abc import Sequence

from perftop.model.snapshot import StepStats
from perftop.model.stats import percentile
from perftop.model.steps import BACKWARD, LIVE_WINDOW, UPDATE, StepSeries


def step_stats(
    series: StepSeries,
    rank: int | None,
    window: int | None = LIVE_WINDOW,
    host: str = "",
    syncs: int = 0,
) -> StepStats:
    """Figures over the last ``window`` steps (None: the whole run, from the sketches
    once it no longer fits in the ring)."""
    series.bin_up()
    n = series.count
    if n == 0:
        return StepStats(pid=series.pid, rank=rank, host=host, sync_count=syncs)
    gpus = sorted(series.gpu.values())  # a recent row's GPU time is one of these
    if window is None and n > LIVE_WINDOW:
        s_dur, s_data, s_other, s_bwd, s_opt, s_own = series.sketches
        total, data_total = series.total, series.data_total
        count, p50, p95, top = n, s_dur.percentile(50), s_dur.percentile(95), series.max
        phase_p50 = {
            "data": s_data.percentile(50),
            "forward/other": s_other.percentile(50),
            "backward": s_bwd.percentile(50),
            "optimizer": s_opt.percentile(50),
        }
        own_p50 = s_own.percentile(50)
    else:
        last = LIVE_WINDOW if window is None else window
        whole = last >= LIVE_WINDOW and n >= LIVE_WINDOW  # the whole ring: order moot
        raw: Sequence[Sequence[float]] = series.columns() if whole else series.window(last)
        total, data_total, count = sum(raw[0]), sum(raw[1]), len(raw[0])
        sdur, data, others, bwd, opt, own = (
            series.sorted_ring.sorted(raw, n) if whole else map(sorted, raw)
        )
        p50, p95, top = percentile(sdur, 50), percentile(sdur, 95), sdur[-1]
        phase_p50 = {
            "data": percentile(data, 50),
            "forward/other": percentile(others, 50),
            "backward": percentile(bwd, 50),
            "optimizer": percentile(opt, 50),
        }
        own_p50 = percentile(own, 50)
    seen = series.unseen_at <= n - count  # no step of these lacks its data wait
    if not seen:  # not seen: absent, not 0
        phase_p50.pop("data", None)
    if series.strongest < UPDATE:
        phase_p50.pop("optimizer", None)
    if series.strongest < BACKWARD:
        phase_p50.pop("backward", None)
    return StepStats(
        pid=series.pid,
        rank=rank,
        count=n,
        steps_per_s=(count / total) if total > 0 else None,
        wall_steps_per_s=_wall_rate(series, count),
        p50=p50,
        p95=p95,
        max=top,
        phase_p50={k: v for k, v in phase_p50.items() if v is not None},
        data_wait_fraction=(data_total / total) if total > 0 and seen else None,
        gpu_p50=percentile(gpus, 50) if gpus else None,
        last_t=series.last_t1,
        recent=tuple(series.recent),
        first_t=series.first_t0,
        first_end_t=series.first_t1,
        host=host,
        own_p50=own_p50,
        sync_count=syncs,
        step_hist=tuple(series.hist),
        step_sum_s=series.total,
    )


def _wall_rate(series: StepSeries, count: int) -> float | None:
    """The last ``count`` steps over the wall time from the first one's start to the
    last one's end: the time between them (an evaluation, a checkpoint) counts, as in
    the rate a library's own counter gives (the HF Trainer's ``train_steps_per_second``)."""
    n, last = series.count, series.last_t1
    t0 = series.first_t0 if count >= n else series.starts[(n - count) % LIVE_WINDOW]
    if t0 is None or last is None or last <= t0:
        return None
    return count / (last - t0)
