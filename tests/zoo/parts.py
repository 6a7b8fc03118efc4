"""Loop shapes composed from parts: a spec (drawn by hypothesis) and the small Python
training loop it renders to. Each loop counts for itself what it did and writes it as one
JSON object to the file named by ``ZOO_OUT``: its steps, each sync line's calls keyed by
line (and those in steps 1..N-1, the steps a detector can watch), its host-only and
between-steps sync lines, its evaluations, sampling passes and checkpoints with their own
times, its data wait (time around each batch fetch), the function-mode stack depth after
every step, its wall time, and a checksum of its parameters (what it computed)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

from hypothesis import strategies as st

# two_losses: two optimizers, each after its own forward and backward (SAC's, a GAN's):
# drawn last, so a fixed seed's sample without it stays the one it was.
UPDATES = ("optim", "manual", "lbfgs", "grad", "two_optims", "accum", "two_losses")
DATA = ("loader0", "loader1", "slice", "preloaded", "thread")
# Feeders of issue 30 item 3: batches from a producer thread iterating a DataLoader into a
# queue.Queue, a generator, a prefetcher class wrapping a DataLoader or slicing.
FEEDERS = ("thread_loader", "generator", "prefetch_loader", "prefetch_slice")
SLOW_FEEDERS = frozenset({"thread", "generator", "prefetch_slice"})  # sleep feed_ms a batch
OPS = ("item", "bool", "nonzero", "format", "cpu_read")
# Updates whose steps an optimizer closes: an evaluation after it is between steps (a
# backward()-only loop keeps an evaluation without a DataLoader in its step, by design).
OPTIMIZED = frozenset({"optim", "lbfgs", "two_optims", "accum", "two_losses"})
ENGINE_EPOCH = 20  # an engine's epoch, in iterations


@dataclass(frozen=True)
class Sync:
    op: str  # one of OPS, on a value computed from the model (device-bound)
    # 1, k, 0: random, with probability ``chance``, or -k: the first k iterations only
    # (a log on iterations 1-4, as ignite's: the always-watched first steps hold it)
    period: int
    phase: int = 0
    chance: float = 0.0
    after: bool = False  # after the update (then it is in the next step)
    on_data: bool = False  # on the batch itself (preloaded device data), not on the loss


@dataclass(frozen=True)
class Spec:
    update: str
    data: str
    syncs: tuple[Sync, ...] = ()
    steps: int = 100
    width: int = 64
    batch: int = 32
    evaluate: int = 0  # an evaluation after every N-th step (0: none)
    sample: int = 0  # a sampling pass (int() of the argmax, 4 times) every N-th step
    # an RL rollout every N-th step: a gymnasium env stepped 6 times by the model's forward
    # with grad off, its return read once (issue 44: a ``rollout`` pass, not an ``eval``)
    rollout: int = 0
    checkpoint: int = 0  # torch.save every N-th step
    host_transform: bool = False  # per sample: torch.as_tensor(.., device=x.device), bool()
    compiled: bool = False
    seed: int = 0
    feed_ms: int = 0  # a slicing feeder's own time a batch (reading a shard: a sleep)
    final: bool = False  # an evaluation and a save after the last step (issue 30 item 2)
    slow_eval: float = 0.0  # one evaluation this long (s) mid-run: no stall (issue 30 item 1)
    after_ms: int = 0  # host work after each update (a log line written): this long on the CPU
    # An evaluation over the training DataLoader's first 3 batches every N-th step (0:
    # none), fetched with grad on, no_grad inside each iteration: pytorch-ignite's
    # ``evaluator.run(train_loader)`` (issue 44 item 4). loader0 only, never compiled; at
    # iterations where no other pass runs, nor in the iterations next to one.
    loader_eval: int = 0
    # The host batch kept beside its copy sent to the device (ignite's engine.state.batch),
    # read after the forward, and a value computed on the host from ``.cpu()``'s copy
    # (issue 45 items 1-2): host lines, beside one ``.cpu()`` site a step. Not on preloaded
    # data (no host batch there).
    host_copy: bool = False
    # Issue 44's ecosystem shapes, drawn after all the others. An ignite-like Engine whose
    # handlers run on its events after each update: a log line reading the loss (a sync)
    # every iteration, and an epoch's (a sync) every ENGINE_EPOCH iterations.
    engine: bool = False
    # A wrapper over the DataLoader (loader0, loader1) that fetches the next batch ahead, an
    # epoch at a time (Ray Train's ``prepare_data_loader``): on the training thread
    # ("same": an epoch's last batch makes no fetch) or on a thread of its own ("thread").
    ahead: str = ""
    save_burst: bool = False  # a checkpoint is 3 torch.save calls (save_state): one interval
    idle_s: float = 0.0  # the process idles this long after its last step (a Ray worker)
    # The evaluations (``evaluate`` and the final one) over a validation DataLoader of
    # their own, iterated under this grad mode ("no_grad", "inference_mode"): a pass its
    # first batch opens (fetched with grad off), not a forward; or with grad on, the model
    # in eval mode ("grad_on"): a pass its batches open, a forward between them. Never
    # compiled.
    val: str = ""
    # accum only: the step's micro-batches all fetched before its first forward, as the HF
    # Trainer's ``get_batch_samples`` does (issue 45's follow-up: the first step's batches
    # were lost and the run's DataLoader wait was said to be a feeder's). Drawn last.
    upfront: bool = False
    # The rollouts with grad on, the model in eval mode (tianshou's collectors), not under
    # ``no_grad``: still ``rollout`` passes. Never compiled. Drawn after all the others.
    rollout_eval: bool = False
    # The loop marks each step itself: ``perftop.step()`` right after the update (the
    # explicit API, docs/steps.md), where an optimizer's step may have closed it already.
    # Drawn after all the others.
    explicit: bool = False
    # The rollouts make much Python work between the policy's forward and the environment's
    # step (RLlib's connector pipelines: ~3,000 profile events an env step, more than the
    # 2,048 perftop once looked at a pass). Drawn after all the others.
    rollout_work: bool = False

    def show(self) -> str:
        return repr(asdict(self))


def between_steps(spec: Spec) -> bool:
    """Whether a pass after the update is between steps: an optimizer's step closed the
    step, or the loop's ``perftop.step()`` did (a backward()-only loop without one keeps
    an evaluation without a DataLoader in its step, by design)."""
    return spec.update in OPTIMIZED or spec.explicit


def syncs(data: str) -> st.SearchStrategy[Sync]:
    on_data = st.booleans() if data == "preloaded" else st.just(False)
    return st.builds(
        Sync,
        op=st.sampled_from(OPS),
        period=st.sampled_from((1, 1, 2, 3, 5, 7, 10, 0, -4)),
        phase=st.integers(0, 9),
        chance=st.sampled_from((0.2, 0.35, 0.5)),
        after=st.booleans(),
        on_data=on_data,
    )


@st.composite
def specs(draw: st.DrawFn, compile_odds: int = 15, avoid: frozenset[str] = frozenset()) -> Spec:
    """A loop spec; ``avoid``: parts left out (an update or a data source by name,
    ``on_data``, ``after``, ``host_transform``, ``compiled``, ``rollout``, ``host_copy``,
    ``val``, ``rollout_eval``, ``explicit``, ``rollout_work`` and those of :func:`_ecosystem`), for a
    sample that should not meet a known bug."""
    update = draw(st.sampled_from([u for u in UPDATES if u not in avoid]))
    data = draw(st.sampled_from([d for d in DATA + FEEDERS if d not in avoid]))
    ss = tuple(draw(st.lists(syncs(data), min_size=0, max_size=3)))
    if "on_data" in avoid:
        ss = tuple(s for s in ss if not s.on_data)
    if "after" in avoid:  # syncs after the update read a value made in the step before
        ss = tuple(replace(s, after=False) for s in ss)
    every = st.sampled_from((0, 0, 7, 13, 29))
    # drawn in the order of the fields (a fixed seed's sample stays the same)
    steps, width = draw(st.sampled_from((80, 120, 200))), draw(st.sampled_from((64, 256)))
    evaluate, sample = draw(every), draw(every)
    rollout = 0 if "rollout" in avoid else draw(every)
    checkpoint = draw(every)
    host_transform = "host_transform" not in avoid and draw(st.booleans())
    compiled = "compiled" not in avoid and draw(st.integers(1, compile_odds)) == 1
    rest = _late(draw, data, update, rollout, checkpoint, compiled, avoid)
    return Spec(
        update=update,
        data=data,
        syncs=ss,
        steps=steps,
        width=width,
        evaluate=evaluate,
        sample=sample,
        rollout=rollout,
        checkpoint=checkpoint,
        host_transform=host_transform,
        compiled=compiled,
        **rest,
    )


def _late(
    draw: st.DrawFn, data: str, update: str, rollout: int, checkpoint: int, compiled: bool,
    avoid: frozenset[str],
) -> dict[str, Any]:  # fmt: skip
    """The parts drawn after the first ones, in the order they were added (a fixed seed's
    sample of the parts before one stays the one it was)."""
    seed = draw(st.integers(0, 2**16))
    acct = _accounting(draw, data, avoid | ({"loader_eval"} if compiled else set()))
    host_copy = data != "preloaded" and "host_copy" not in avoid and draw(st.integers(1, 3)) == 1
    eco = _ecosystem(draw, data, checkpoint, avoid)
    val = draw(st.sampled_from(VAL_MODES)) if not ({"val"} & avoid or compiled) else ""
    if val == "grad_on" and (data not in ("loader0", "loader1") or eco["ahead"] == "thread"):
        # with grad on, an evaluation's batches open its pass, and where no training
        # loader's batch follows on the training thread it ends at the loader's end: its
        # score after the loop is the next step's (docs/steps.md)
        val = "no_grad"
    upfront = update == "accum" and "upfront" not in avoid and draw(st.booleans())
    rollout_eval = (
        bool(rollout)
        and not compiled
        and "rollout_eval" not in avoid
        and val != "grad_on"  # two passes with grad on in a stretch: one interval
        and draw(st.booleans())
    )
    explicit = "explicit" not in avoid and draw(st.integers(1, 4)) == 1
    rollout_work = bool(rollout) and "rollout_work" not in avoid and draw(st.booleans())
    return {
        "seed": seed,
        **acct,
        "host_copy": host_copy,
        **eco,
        "val": val,
        "upfront": upfront,
        "rollout_eval": rollout_eval,
        "explicit": explicit,
        "rollout_work": rollout_work,
    }


# grad_on: the model in eval mode, autograd on, each batch's forward well under 1 ms
VAL_MODES = ("", "", "no_grad", "inference_mode", "grad_on")


def _ecosystem(
    draw: st.DrawFn, data: str, checkpoint: int, avoid: frozenset[str]
) -> dict[str, Any]:
    """Issue 44's parts (``avoid``: ``engine``, ``ahead``, ``save_burst``, ``idle``), each
    drawn only where it is not avoided (a sample avoiding them all is the one it was)."""
    ahead = data in ("loader0", "loader1") and "ahead" not in avoid
    return {
        "engine": "engine" not in avoid and draw(st.integers(1, 3)) == 1,
        "ahead": draw(st.sampled_from(("", "", "same", "thread"))) if ahead else "",
        "save_burst": bool(checkpoint) and "save_burst" not in avoid and draw(st.booleans()),
        "idle_s": 2.5 if "idle" not in avoid and draw(st.integers(1, 4)) == 1 else 0.0,
    }


def _accounting(draw: st.DrawFn, data: str, avoid: frozenset[str]) -> dict[str, Any]:
    """The parts issue 30's oracles read: a feeder's own time, passes after the last step,
    a long evaluation, host work after the update (``avoid``: ``final``, ``slow_eval``,
    ``after_ms``), and issue 44's evaluation over the training loader (``loader_eval``)."""
    return {
        "feed_ms": draw(st.sampled_from((0, 1, 3))) if data in SLOW_FEEDERS else 0,
        "final": "final" not in avoid and draw(st.integers(1, 4)) == 1,
        "slow_eval": 2.5 if "slow_eval" not in avoid and draw(st.integers(1, 8)) == 1 else 0.0,
        "after_ms": 2 if "after_ms" not in avoid and draw(st.integers(1, 6)) == 1 else 0,
        "loader_eval": (
            draw(st.sampled_from((0, 11, 17)))
            if data == "loader0" and "loader_eval" not in avoid
            else 0
        ),
    }


def _iterations(spec: Spec, *everies: int) -> set[int]:
    """The iterations after which a part made every N-th step runs, and the slow one's."""
    at = {i for every in everies if every for i in range(every - 1, spec.steps, every)}
    if spec.slow_eval:
        at.add(spec.steps // 2)
    return at


def adjacent_passes(spec: Spec) -> bool:
    """Whether an evaluation or sampling pass follows one in the iteration before (the
    later one is taken for per-step work today: issue 30 item 2)."""
    at = _iterations(spec, spec.evaluate, spec.sample, spec.rollout)
    if spec.final:  # after the loop: after the last step
        at.add(spec.steps - 1)
    return any(i - 1 in at for i in at)


def loader_eval_at(spec: Spec) -> list[int]:
    """The iterations of ``loader_eval``'s evaluations: where no other pass runs, nor in
    the iterations next to one, nor after the last step."""
    if not spec.loader_eval:
        return []
    busy = _iterations(spec, spec.evaluate, spec.sample, spec.rollout, spec.checkpoint)
    return [
        i
        for i in range(spec.loader_eval - 1, spec.steps - 1, spec.loader_eval)
        if not {i - 1, i, i + 1} & busy
    ]
