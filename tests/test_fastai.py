"""fastai's ``Learner`` with its own optimizer (fastai's ``Adam``: no ``torch.optim``
class, so torch's optimizer hooks never run for it) and ``GradientAccumulation``, checked
against its own callback's counts: a step per update, not per micro-batch (perftop read
each of the 144 batches as a step before it timed fastai's optimizer), with its
optimizer phase; each validation one pass named by fastai's batch function, its loss's
``.item()`` a sync between steps; the same weights as the job alone.

fastai requires torchvision and spacy, which pip cannot install beside the CPU build of
torch (torchvision's wheels pull another torch); ``fastai.basics`` imports neither, and
``.ci/run`` installs fastai without them."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import pytest

from tests.helpers import WORKLOADS, run_and_report

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("fastai") is None,
    reason="fastai is not installed (.ci/run installs it: it needs torchvision and spacy "
    "by its metadata, which pip cannot install beside CPU torch)",
)
JOB = str(WORKLOADS / "fastai_fit.py")


def test_fastai_updates_are_the_steps(tmp_path) -> None:
    plain = subprocess.run([sys.executable, JOB], cwd=tmp_path, capture_output=True,
                           text=True, timeout=120)  # fmt: skip
    assert plain.returncode == 0, plain.stderr[-2000:]
    proc, rep = run_and_report(tmp_path, sys.executable, JOB)
    assert proc.returncode == 0, proc.stderr[-2000:]
    own = json.loads(proc.stdout.strip().splitlines()[-1])
    assert own["opt"] == "fastai.optimizer.Optimizer"
    assert own["weights"] == json.loads(plain.stdout.strip().splitlines()[-1])["weights"]
    s = rep["steps"]
    assert (own["train_batches"], own["updates"]) == (144, 36)
    assert s["count"] == own["updates"], s
    assert s["phases_s"]["optimizer"] > 0 and s["phases_s"]["backward"] > 0, s
    ev = s["between_s"]["eval"]
    assert ev["count"] == own["epochs"] == 3, s["between_s"]
    assert ev["site"].startswith("_do_one_batch (fastai/learner.py:"), ev
    # the validation loss's .item(), a sync on a GPU: on CPU its loss is computed from
    # fastai's TensorBase views of the model's output, which read as host data before
    (site,) = [e for e in rep["sync_between"] if e["line"] == own["val_loss_line"]]
    assert site["op"] == "item" and site["per_pass"] == own["valid_batches"] / 3, site
