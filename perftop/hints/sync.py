"""``host-device-sync``: lines of the user's code that make the host wait for the GPU,
every step, each named with the usual rewrite that keeps the work on the device.

On a CPU job the sites are ``potential`` (they would stall once the job runs on a GPU):
the hint still names them, as information, and claims no gain it cannot measure."""

from __future__ import annotations

from perftop.fmt import count
from perftop.fmt_sync import sync_rate, sync_rated, sync_where
from perftop.hints.base import fraction, plural, seconds, threshold
from perftop.model.snapshot import Hint, Severity, Snapshot, SyncSite

ENTER, STAY = 1.0, 0.5  # syncs per step, all sites together
SITE_MIN = 0.1  # a site rarer than this per step is not worth naming
SHOWN = 4  # sites named in the evidence

REWRITES = {
    "nonzero": "torch.where(cond, x, y) instead of nonzero() and indexing: shapes stay fixed",
    "argwhere": "torch.where(cond, x, y) instead of argwhere() and indexing",
    "boolean_mask": "keep full shapes instead of x[mask]: ignore_index= in the loss, or "
    "(x * mask).sum() / mask.sum()",
    "masked_select": "keep full shapes: torch.where(mask, x, 0) instead of masked_select",
    "unique": "count distinct values without unique(): (torch.bincount(x, minlength=K) > 0)"
    ".sum(), or sort and count the steps",
    "unique_consecutive": "count changes on the device: (x[1:] != x[:-1]).sum() + 1",
    "repeat_interleave": "pass output_size= to repeat_interleave",
    "pageable_copy": "pin the source (pin_memory=True, tensor.pin_memory()) before a "
    "non_blocking copy",
}
_TO_HOST = ("int", "float", "bool", "index", "tolist", "numpy", "cpu", "format", "repr")


# What a value read on the host is for cannot be told from its call: a loss or a metric
# being logged, or a number the host needs every step. The advice says so, and what to
# do in each case, instead of guessing.
_BY_USE = (
    "perftop cannot tell what the value is for: if the host needs it every step (an "
    "action for an environment, an early-stopping test), it leaves the step only by "
    "restructuring (decide on the device, or for several steps at once); if it is logged "
    "(a loss, a statistic), reduce it on the device (x.detach() into a running tensor) "
    "and read it every N steps"
)


def rewrite(op: str) -> str:
    op = op.strip(".()").removeprefix("torch.").removeprefix("Tensor.")
    if op in REWRITES:
        return REWRITES[op]
    if op == "item" or op in _TO_HOST:
        return f"{op}() copies a device value to the host and waits for it; {_BY_USE}"
    return f"{op}: look for a way to keep this on the device"


def where(s: SyncSite) -> str:
    """The user's line, and the library line it went through where a library made the
    call: two sites inside ``trainer.train()`` are two places, not one line twice."""
    callers = [(f, n) for f, n, _, _ in s.callers]
    user, lib = sync_where(s.file, s.line, s.lib_file, s.lib_line, s.package, callers)
    return f"{user} (via {lib})" if lib else user


def site_rate(s: SyncSite) -> str:
    """A site's rate as the Sync panel and the report give it (its error where sampled;
    what was seen where the sampling cannot yet tell a rate)."""
    text = sync_rate(s.per_step, s.error, s.seen, every=s.every_step, watched=s.watched)
    return f"{text} a step" if text[:1].isdigit() else text


def host_device_sync(snap: Snapshot, active: frozenset[str]) -> list[Hint]:
    """Counts the syncs inside training steps (``per_step``) only; syncs made between
    steps are named apart, since they cost no step time."""
    sites = [s for s in snap.sync if s.per_step >= SITE_MIN]
    per_step = sum(s.per_step for s in sites)
    if per_step < threshold("host-device-sync", active, ENTER, STAY):
        return []
    real = [s for s in sites if s.kind == "sync"]
    top = sorted(sites, key=lambda s: (s.kind != "sync", -(s.blocked_s or 0.0), -s.per_step))
    top = top[:SHOWN]
    # The sum's standard error at most the sum of the sites' (one set of watched steps)
    err = sum(s.error or 0.0 for s in sites)
    total = f"{per_step:.1f}" + (f" ±{err:.1f}" if err >= 0.05 else "")
    n_lines = count(len(sites), "line")
    # An error as large as the sum (few steps watched yet), as it reads, or a site without
    # a rate of its own (fmt_sync.sync_rated): no rate, what was seen, as the sites' rows read
    # then: "4.0 ±5.1" said nothing, and "2.0 ±2.0" over two sites "in 5 of 5 watched steps"
    # gave the sum a rate its parts did not have
    rated = round(err, 1) < round(per_step, 1) and all(
        sync_rated(s.per_step, s.error, s.seen, s.every_step, s.watched) for s in sites
    )
    watched = max((s.watched or 0) for s in sites)
    ev = [
        (
            f"{total} host-device syncs per step at {n_lines}"
            if rated
            else f"host-device syncs at {n_lines} in the {watched} steps watched: "
            "too few for a rate per step"
        )
        + ("" if real else " (seen by the detector; they stall once the job runs on a GPU)")
    ]
    for s in top:
        blocked = f", {seconds(s.blocked_s)} blocked a step" if s.blocked_s else ""
        ev.append(f"{where(s)} {s.op} in {s.function}(): {site_rate(s)}{blocked}")
    for s in snap.sync_between[:2]:  # evaluation or sampling passes: no step's time
        rate = f", {s.per_pass:.0f} per pass" if s.per_pass else ""
        ev.append(f"between steps (not counted above): {where(s)} {s.op}, {s.count} syncs{rate}")
    advice = []
    for op in dict.fromkeys(s.op for s in top):
        lines = plural(where(s) for s in top if s.op == op)
        advice.append(f"{lines}: {rewrite(op)}.")
    gain, gain_txt = _gain(snap, real)
    if real:
        severity: Severity = "high" if per_step >= 5 or (gain or 0.0) >= 0.2 else "medium"
        title = "Host-device syncs: the host waits for the GPU " + (
            f"{total} times a step" if rated else f"at {n_lines}"
        )
    else:
        severity = "info"
        title = (
            f"Host-device syncs: {total} per step would stall a GPU"
            if rated
            else f"Host-device syncs at {n_lines} would stall a GPU"
        )
    return [
        Hint(
            id="host-device-sync",
            severity=severity,
            title=title,
            evidence=tuple(ev),
            advice=tuple(advice),
            est_gain=gain,
            est_gain_text=gain_txt,
            panel="sync",
        )
    ]


def _gain(snap: Snapshot, real: list[SyncSite]) -> tuple[float | None, str]:
    # blocked_s is host seconds spent waiting per watched step (measured on sampled steps)
    blocked = sum(s.blocked_s for s in real if s.blocked_s)
    step = snap.steps.p50
    if blocked and step:
        share = min(1.0, blocked / step)
        return round(share, 4), f"up to {fraction(share)} of step time (the host blocked)"
    if real:
        return None, "not measured: each sync drains the GPU's queue; its cost depends on it"
    return None, "none on this device; on a GPU each one drains the queue"
