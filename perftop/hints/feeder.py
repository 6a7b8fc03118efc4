"""``wait-before-forward``: a loop with no DataLoader on its training thread (a thread
filling a queue, a generator, a prefetcher class) spends much of each step off the CPU
before its forwards.

That figure is the step's data wait behind a feeder (docs/steps.md), but it also holds the
loop's own blocking work there (a sleep, a blocking write, a lock), so ``input-bound``,
which says the loop waits for batches, does not fire on it. Left unsaid, the Hints panel
read "nothing found that slowed this job down" beside a Steps panel reading "data wait 97%
before forward": this rule says what was measured, and both things it can be.
"""

from __future__ import annotations

from perftop.hints.base import fraction, seconds
from perftop.hints.inputs import waiting_loop
from perftop.model.snapshot import Hint, Snapshot

HINT_ID = "wait-before-forward"

ADVICE = (
    "If a thread, a generator or a prefetcher feeds the loop, it does not keep up: make "
    "batches in parallel processes (a DataLoader with num_workers=2 or more, or a "
    "process pool behind the queue), prefetch further ahead, or make each batch cheaper.",
    "If the loop itself blocks before its forward (a time.sleep, a blocking log or file "
    "write, a lock or a barrier), move that out of the step or make it asynchronous.",
)


def wait_before_forward(snap: Snapshot, active: frozenset[str]) -> list[Hint]:
    """The bars are ``input-bound``'s (30% to raise, 20% to keep; none where a job GPU is
    90% busy): the same figure, read where no DataLoader feeds the training thread."""
    if snap.steps.data_wait_source != "before_forward":
        return []
    got = waiting_loop(snap, active, HINT_ID)
    if got is None:
        return []
    lp, gpu = got
    share = lp.data_share
    ev = [
        f"the training thread is off the CPU before its forwards {fraction(share)} of step "
        f"time: {seconds(lp.data_s)} of a {seconds(lp.step_s)} step on average, over the "
        f"last {lp.n} steps",
        "no DataLoader is iterated on the training thread: what feeds it is not timed apart "
        "from the loop's own blocking there (a sleep, a blocking write)",
    ]
    comm_wait = next((r.wait_s for r in snap.comm.ranks if r.pid == lp.pid and r.wait_s), None)
    if comm_wait:
        ev.append(
            f"this rank also waits {seconds(comm_wait)} a step at collectives (median): one "
            "before its forward (a barrier, a metric's all_reduce) is in the time above"
        )
    if gpu is not None:
        ev.append(f"the GPU is busy {gpu:.0f}% of the time (NVML)")
    return [
        Hint(
            id="wait-before-forward",
            severity="high" if share >= 0.5 else "medium",
            title=f"Waiting before each forward: {fraction(share)} of each step off the CPU",
            evidence=tuple(ev),
            advice=ADVICE,
            est_gain=round(share, 4),
            est_gain_text=(
                f"up to {fraction(share)} of step time, if nothing before the forward "
                "waited (a feeder that kept up, no blocking work there)"
            ),
            panel="steps",
        )
    ]
