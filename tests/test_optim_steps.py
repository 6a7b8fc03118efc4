"""How ``opt.step()`` is timed (``perftop/hook/optim_steps.py``): torch's global optimizer
hooks, one pre- and one post-hook, and each class's step left torch's own, before and
after a compile of the step. Real jobs under ``perftop run``, each counting its own
optimizer steps, against the same job run plain."""

from __future__ import annotations

import json
import sys

from perftop.hook.optim_steps import COMPILED_STEP_NOTE
from tests.helpers import injected_job, run_and_report
from tests.plainrun import run_plain

JOB = r"""
import json, sys, torch
import torch.optim.optimizer as o

def how(opt):
    return {"step": type(type(opt).step).__name__,
            "global_hooks": len(o._global_optimizer_pre_hooks) + len(o._global_optimizer_post_hooks)}

class Nested(torch.optim.SGD):  # a step of its own that calls its base class's
    def step(self, closure=None):
        return super().step(closure)

torch.manual_seed(0)
m = torch.nn.Linear(8, 2)
sgd = torch.optim.SGD(m.parameters(), lr=0.1)
nested = Nested(m.parameters(), lr=0.01)
sched = torch.optim.lr_scheduler.StepLR(sgd, 3)
lbfgs = torch.optim.LBFGS(m.parameters(), max_iter=2)
seen = {"before": how(sgd), "nested": how(nested)}
count = 0
def train(opt, n):
    global count
    for _ in range(n):
        opt.zero_grad()
        m(torch.randn(4, 8)).pow(2).mean().backward()
        opt.step()
        count += 1
        if opt is sgd:
            sched.step()
def closure():
    lbfgs.zero_grad()
    loss = m(torch.randn(4, 8)).pow(2).mean()
    loss.backward()
    return loss
train(sgd, 20)
train(nested, 10)
for _ in range(5):
    lbfgs.step(closure)
    count += 1
if sys.argv[1:] == ["compile"]:
    torch._dynamo.reset()  # clears dynamo's callbacks: the compile itself is what counts
    step = torch.compile(lambda: sgd.step(), backend="eager")
    for _ in range(10):
        sgd.zero_grad()
        m(torch.randn(4, 8)).pow(2).mean().backward()
        step()
        count += 1
    seen["compiled"] = how(sgd)
print(json.dumps({"seen": seen, "count": count, "w": round(m.weight.sum().item(), 6)}))
"""


def _run(tmp_path, *args):
    job = tmp_path / "job.py"
    job.write_text(JOB)
    proc, rep = run_and_report(tmp_path, sys.executable, str(job), *args)
    assert proc.returncode == 0, proc.stderr
    own = json.loads(next(ln for ln in proc.stdout.splitlines() if ln.startswith("{")))
    return own, rep


def _plain(tmp_path, *args):
    p = run_plain([sys.executable, str(tmp_path / "job.py"), *args], check=True)
    return json.loads(p.stdout)


def test_each_class_step_stays_torchs_and_two_global_hooks_time_it(tmp_path):
    own, rep = _run(tmp_path)
    assert COMPILED_STEP_NOTE not in [n["text"] for n in rep["notes"]]
    plain = _plain(tmp_path)
    assert (own["w"], own["count"]) == (plain["w"], plain["count"])  # the same training
    assert plain["seen"]["before"] == {"step": "function", "global_hooks": 0}
    assert own["seen"]["before"] == {"step": "function", "global_hooks": 2}
    assert own["seen"]["nested"] == {"step": "function", "global_hooks": 2}
    assert rep["steps"]["count"] == own["count"] == 35  # a nested step is one step


def test_a_compiled_step_is_timed_by_the_same_hooks_and_counted_across(tmp_path):
    own, rep = _run(tmp_path, "compile")
    plain = _plain(tmp_path, "compile")
    assert (own["w"], own["count"]) == (plain["w"], plain["count"])
    assert plain["seen"]["compiled"] == {"step": "function", "global_hooks": 0}
    assert own["seen"]["before"]["step"] == "function"
    assert own["seen"]["compiled"] == {"step": "function", "global_hooks": 2}
    # A compiled opt.step() skips perftop's hooks (dynamo ignores them: no graph break):
    # its steps are not seen, and perftop says so; the 35 eager ones are all counted.
    assert own["count"] == 45 and 35 <= rep["steps"]["count"] < 45
    assert COMPILED_STEP_NOTE in [n["text"] for n in rep["notes"]]


def test_a_hook_that_arrives_after_the_first_optimizer_times_it_the_same_way(tmp_path):
    """A hook injected into a running job (what ``sys.remote_exec`` runs, run by hand):
    the job's optimizers exist, their classes' steps are torch's and maybe compiled; their
    steps are timed through torch's global hooks, as any job's."""
    after = (
        "for _ in range(20): step()\n"
        "import torch.optim.optimizer as o\n"
        "print(type(type(opt).step).__name__, len(o._global_optimizer_pre_hooks))\n"
    )
    with injected_job(tmp_path, after) as (p, _):
        assert p.stdout.split() == ["function", "1"]
