"""The loop-shape fuzzer's fixed-seed sample (tests/zoo): a few loops composed from parts,
each run plainly, under ``perftop run --headless`` and in the exact mode, and checked by
the oracles against the loop's own count. ``scripts/loop_fuzz.py --n 300`` runs a long
campaign of the same. Shapes that meet a bug issue 29 names are run apart, as expected
failures that flip when the fix lands."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, Phase, assume, given, settings

from tests.zoo.oracles import errors_off
from tests.zoo.parts import Spec, Sync, specs
from tests.zoo.run import run_accounting, run_spec

# Parts that meet what is still open, left out of the sample.
KNOWN = frozenset({"grad", "on_data", "compiled"})
# A long evaluation costs 2.5 s (one loop below has it).
KNOWN_30 = frozenset({"slow_eval"})
# Drawn by the campaign; the fixed sample stays the one it was (two host-transform loops
# below have the part).
DRAWN_LATER = frozenset(
    {
        "host_copy",
        "engine",
        "ahead",
        "save_burst",
        "idle",
        "two_losses",
        "val",
        "rollout_eval",
        "explicit",
    }
)


@settings(
    derandomize=True,
    max_examples=2,
    deadline=None,
    database=None,
    phases=(Phase.generate,),
    suppress_health_check=list(HealthCheck),
)
@given(spec=specs(avoid=KNOWN | KNOWN_30 | DRAWN_LATER))
@pytest.mark.timeout(600)  # a few real runs each; about 20 s a loop on 2 idle cores
def test_a_fixed_sample_of_loop_shapes(spec: Spec, tmp_path_factory: pytest.TempPathFactory):
    assume(len(spec.syncs) >= 2 and (spec.evaluate or spec.sample or spec.checkpoint))
    res = run_spec(spec, tmp_path_factory.mktemp("zoo"))
    assert not res.failures, res.show()


def test_periodic_lines_sampled_on_a_long_loop(tmp_path):
    """A log line every 10th iteration after the update (iteration 0 included), and an
    image-save-like line every 7th: their sampled rates within the stated error."""
    spec = Spec(
        "optim",
        "slice",
        (Sync("item", 10, 0, after=True), Sync("format", 7, 3), Sync("item", 1)),
        steps=200,
        width=64,
        seed=29,
    )
    res = run_spec(spec, tmp_path, ("sampled",))
    assert not res.failures, res.show()
    own = json.loads((tmp_path / "sampled.json").read_text())
    rep = json.loads((tmp_path / "sampled.report.json").read_text())
    off = errors_off(own, rep)  # the campaign's coverage figure: the two periodic lines
    assert len(off) == 2, off  # (the every-step one states none: seen in every watched step)
    # reported (a distance in errors) or seen by no watched step (None)
    assert all(z is None or 0 <= z < float("inf") for z in off), off


FIXED = [
    pytest.param(
        Spec("manual", "slice", (Sync("item", 1),), steps=80),
        id="manual-update",
    ),
    pytest.param(
        # and the host batch read beside its device copy (issue 45 item 2)
        Spec("optim", "slice", (Sync("item", 1),), steps=80, host_transform=True, host_copy=True),
        id="host-transform",
    ),
    # the fuzzer's own finding (issue 30): an evaluation after opt2.step() stayed in the step
    pytest.param(Spec("two_optims", "slice", (), steps=80, evaluate=7), id="eval-after-opt2"),
    pytest.param(  # the campaign's finding: a batch rebuilt from a worker's shared memory
        Spec("optim", "loader1", (Sync("item", 1),), steps=80, host_transform=True, host_copy=True),
        id="host-transform-behind-loader-workers",
    ),
    pytest.param(  # the 300-loop campaign's finding: an evaluation over the training
        # loader after an iteration of two losses (each with its optimizer) was in the step
        Spec("two_losses", "loader0", (), steps=60, loader_eval=11),
        id="loader-eval-after-two-losses",
    ),
    pytest.param(  # the same campaign's: the wait for a feeder's batch after every other
        # pass of a two-loss loop read 0 (the median of recent waits, half of them the
        # second forward's, which waits for nothing, was 0)
        Spec("two_losses", "prefetch_slice", (), steps=120, evaluate=3, feed_ms=1),
        id="feeder-wait-after-passes-of-two-losses",
    ),
    pytest.param(  # evaluations over a validation loader (opened by their first batch,
        # fetched with grad off), the last after the last step, then idle: the final one
        # held the idle second too, to the exit
        Spec(
            "optim",
            "loader0",
            (Sync("item", 1),),
            steps=80,
            evaluate=13,
            final=True,
            idle_s=1.0,
            val="inference_mode",
        ),
        id="final-evaluation-over-a-validation-loader-then-idle",
    ),  # fmt: skip
    pytest.param(
        # a metric made before the update, formatted after it: in the step before, which
        # the detector primes (marks only) before each watched step (long enough to have
        # samples after the early ones)
        Spec("optim", "slice", (Sync("format", 1, after=True),), steps=1500),
        id="value-made-before-the-watched-step",
    ),
    pytest.param(  # the campaign `--n 12 --seed 1301`'s: a manual update's steps end at
        # loss.backward(), inside the mode's dispatch; an inference_mode evaluation watched
        # on its own draw (the first two surely) ends there, and the mode stayed on the
        # stack through the update and the loop's code until the next forward
        Spec("manual", "slice", (), steps=60, evaluate=29, val="inference_mode"),
        id="pass-watch-ending-in-a-manual-updates-backward",
    ),
    pytest.param(  # the campaign `--n 300 --seed 1403`'s: behind a feeder, an evaluation
        # over a validation loader (opened by its first batch) let the forward hook go at
        # its first module call: the pass ran on to the next backward, holding the wait for
        # the feeder's next batch, and that step booked none (15% of the data wait)
        Spec("grad", "prefetch_slice", (), steps=80, evaluate=7, feed_ms=3, val="inference_mode"),
        id="feeder-wait-after-an-evaluation-over-a-validation-loader",
    ),
]


@pytest.mark.parametrize("spec", FIXED)
def test_shapes_the_fuzzer_found_fixed(spec: Spec, tmp_path):
    """A manual update (the mode stayed and counted again and again), a per-sample host
    transform, on slices and behind DataLoader workers (its bool() was a false site), a
    metric made in the step before a watched one (missed), an evaluation after a second
    optimizer's step (it stayed in the step), an evaluation over the training loader
    after an iteration of two losses (its batches and forwards read as the step's), and
    the wait for a feeder's batch after a pass of such a loop (none booked after every
    other pass), a final evaluation over a validation loader then idle (it held the idle):
    found by the fuzzer, fixed. Their findings
    were of counts, not cost: the wall-time oracle is the sample's and the campaign's."""
    res = run_spec(spec, tmp_path, ("sampled",), wall=False)
    assert not res.failures, res.show()


def test_a_long_evaluation_is_no_stalled_step(tmp_path):
    """Issue 30 items 1 and 2: a 2.5 s evaluation mid-run (after short ones), behind a
    DataLoader, and a final one and a save after the last step: every pass and checkpoint
    one interval between steps with the loop's own time, no stalled step (a capture of the
    evaluation as hanging, named so, at most), and the data wait the loop timed."""
    spec = Spec(
        "optim", "loader0", (Sync("item", 1),), steps=60, evaluate=13, checkpoint=29,
        slow_eval=2.5, final=True,
    )  # fmt: skip
    res = run_accounting(spec, tmp_path)
    assert not res.failures, res.show()


def _own(step_ms: list[float], passes: dict[int, float]) -> dict:
    """A loop's own count as tests/zoo/render.py writes it: each iteration's start on the
    thread's CPU clock, a pass (CPU seconds) after some iterations."""
    starts, t = [], 0.0
    for i, ms in enumerate(step_ms):
        starts.append(t)
        t += ms / 1e3 + passes.get(i, 0.0)
    first = step_ms[0] / 1e3
    rows = [[i, "eval", 9, s, 0.0, 0.0, s] for i, s in passes.items()]
    return {"steps": len(step_ms), "wall_s": t, "cpu_s": t, "first_s": first,
            "first_cpu_s": first, "passes": rows, "it_cpu": starts}  # fmt: skip


def test_the_time_oracle_holds_a_cost_of_every_step_apart_from_a_few_watched_steps():
    from tests.zoo.oracles import slower

    plain = _own([20.0] + [1.2] * 119, {29: 0.004, 58: 0.004})
    # five watched steps at 3x: 1.08x in all, the median iteration unchanged
    watched = _own([20.0] + [3.6] * 5 + [1.2] * 114, {29: 0.005, 58: 0.005})
    assert slower([plain], [watched]) is None
    # every step 40% dearer: the median says so though the total alone would pass
    dear = _own([20.0] + [1.68] * 119, {29: 0.004, 58: 0.004})
    got = slower([plain], [dear])
    assert got is not None and "median iteration's 1.68 ms, 1.20 ms plain (1.40x)" in got
    # watched steps that cost the run 2x in all: the total says so
    costly = _own([20.0] + [6.0] * 25 + [1.2] * 94, {29: 0.004, 58: 0.004})
    assert "(1.84x), the median" in (slower([plain], [costly]) or "")
    # the host's load rose after the first plain run (CI: another test's jobs), every run
    # since 1.4x slower: the pair made back to back under it reads alike, and passes
    loaded = _own([20.0] + [1.68] * 119, {29: 0.0056, 58: 0.0056})
    assert slower([plain, loaded], [dear, loaded]) is None
    # a cost of every step shows in every pair, whatever the load
    assert "(1.40x)" in (slower([plain, loaded], [dear, _own([20.0] + [2.35] * 119, {})]) or "")
