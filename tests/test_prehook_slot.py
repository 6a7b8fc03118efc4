"""The one-shot forward pre-hook perftop arms at each step's end sits in torch's own table
of global forward pre-hooks beside the job's (prehook_slot.PreHookSlot): the job's hooks
run as plainly, before it, and it is gone at the step's first module call."""

from __future__ import annotations

import json
import sys

from tests.plainrun import run_plain

JOB = """
import json, torch
from torch.nn.modules import module as M
seen = []
def mine(mod, args):  # the job's own global hook, through torch's API
    seen.append([type(mod).__name__, len(M._global_forward_pre_hooks), args[0].shape[0]])
h = M.register_module_forward_pre_hook(mine)
model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(20):
    opt.zero_grad(); model(torch.randn(2, 4)).sum().backward(); opt.step()
h.remove()
print("SEEN", json.dumps([seen[-3:], len(seen), len(M._global_forward_pre_hooks)]))
"""


def _seen(cmd: list[str]) -> list:
    p = run_plain(cmd)  # forked where it is the plain run (tests/plainrun.py)
    assert p.returncode == 0, p.stderr[-2000:]
    line = next(x for x in p.stdout.splitlines() if x.startswith("SEEN "))
    return json.loads(line[5:])


def test_the_step_end_pre_hook_is_armed_beside_the_jobs_and_gone_at_the_first_call():
    plain = _seen([sys.executable, "-c", JOB])
    assert plain == [[["Sequential", 1, 2], ["Linear", 1, 2], ["ReLU", 1, 2]], 60, 0]
    run = [sys.executable, "-m", "perftop", "run", "--headless", "--no-record", "--"]
    last, calls, left = _seen([*run, sys.executable, "-c", JOB])
    # the job's hook ran at every module call, first, with its arguments as they were;
    # perftop's was there at the step's first call only (armed at the last step's end)
    assert calls == 60
    assert last == [["Sequential", 2, 2], ["Linear", 1, 2], ["ReLU", 1, 2]]
    assert left == 1  # the job's removed; perftop's armed again at the last step's end
