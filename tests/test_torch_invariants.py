"""perftop changes nothing a job can see of torch: every public torch submodule and the
ecosystem's libraries (ignite, stable-baselines3, accelerate, PyG, Ray Train) import as
they do plain, and TorchScript, tracing, torch.compile and torch.export of modules using
the grad modes (decorators and context managers) give the same results and errors; inspect and pickling see torch's own objects, and the functions
dynamo and the job call (``torch.compile``, ``Module.compile``, ``OptimizedModule.__call__``,
each optimizer class's step and ``Optimizer._patch_step_function``) are torch's own code,
not wrappers; a ``torch.compile(model)`` wrapper trained under the
hook warns as it does plain (no "global hooks on modules"). One job
(workloads/torch_invariants.py) run plain and under ``perftop run``, both at once."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import WORKLOADS

JOB = str(WORKLOADS / "torch_invariants.py")


# Two jobs that import every public torch submodule and five libraries: about 60 s on 2
# cores beside the rest of the suite, over 120 s (the suite's default) on a busier host.
@pytest.mark.timeout(480)
def test_torch_seen_by_the_job_is_unchanged(tmp_path: Path) -> None:
    plain_out, hooked_out = tmp_path / "plain.json", tmp_path / "hooked.json"
    run = dict(cwd=tmp_path, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
               stdin=subprocess.DEVNULL)  # fmt: skip
    plain = subprocess.Popen([sys.executable, JOB, str(plain_out)], **run)  # type: ignore[call-overload]
    hooked = subprocess.Popen(  # type: ignore[call-overload]
        [sys.executable, "-m", "perftop", "run", "--headless", "--no-record", "--",
         sys.executable, JOB, str(hooked_out)], **run)  # fmt: skip
    p_out, p_err = plain.communicate(timeout=240)
    h_out, h_err = hooked.communicate(timeout=240)
    assert plain.returncode == 0, p_err[-2000:]
    assert hooked.returncode == 0, h_err[-2000:]
    assert " steps" in h_out + h_err  # the hook was armed: it counted the job's steps
    a, b = json.loads(plain_out.read_text()), json.loads(hooked_out.read_text())
    # the record is a real one: scripted no_grad works plain, ignite and the walk imported
    assert a["1 script scripted_fn"].startswith("'T(")
    for lib in ("ignite", "stable_baselines3", "accelerate", "torch_geometric", "ray.train.torch"):
        assert a[f"1 import {lib}"] == repr(lib), a[f"1 import {lib}"]
    assert a["1 import torch.distributed.optim"] == "'torch.distributed.optim'"
    assert sum(k.startswith("1 import torch.") for k in a) > 300
    for k in (
        "compile",
        "Module.compile",
        "OptimizedModule.__call__",
        "dynamo.optimize",
        "_SingleProcessDataLoaderIter.__init__",
        "_MultiProcessingDataLoaderIter.__init__",
    ):  # torch's own code
        assert a[f"1 ident {k}"].startswith("('function', ("), a[f"1 ident {k}"]
    for k in ("SGD.step", "Adam.step", "LBFGS.step"):  # torch's wrapper, not perftop's
        assert a[f"1 ident {k}"].startswith("('function', ('optim/optimizer.py'"), a
    assert a["1 ident Optimizer._patch_step_function"].startswith("('function', ('optim/")
    assert a["1 compiled model"].startswith("T(")
    assert "global hooks" not in p_err and "global hooks" not in h_err, h_err[-2000:]
    diff = {k: (a.get(k), b.get(k)) for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)}
    assert not diff, json.dumps(diff, indent=1)[:4000]
