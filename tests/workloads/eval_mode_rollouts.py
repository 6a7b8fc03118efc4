"""tianshou's shape: rollouts whose policy runs with grad on, its modules in eval mode (the
collector's ``torch_train_mode(policy, enabled=False)``, no ``no_grad``), then updates in
training mode; a test collection (the same function on another environment) after some
updates; as DQN, a few environment steps between single updates. In the same process (an
environment library imported), a model trained with its modules in eval mode (a frozen
BatchNorm's fine-tuning, tensors in memory: no DataLoader), which steps no environment, and
an evaluation in eval mode with grad on that steps none either: both are the steps' own,
as before.

Prints its own timers as JSON, as tests/workloads/rollout_loop.py does: each pass after the
first update (kind, start, end, first forward call), each update (before its first
forward, before its last optimizer step, after it, after its first forward returned), the
optimizer steps, and the frozen phase's and the evaluation's spans (start, end); last, an
evaluation with grad off and a collection right after it, no step between (``pair``: the
evaluation's start and end, the collection's first forward and end).
argv: rounds (default 4)."""

import contextlib
import json
import sys
import time

import gymnasium
import numpy as np
import torch
from core_wait import run_delay

torch.manual_seed(0)
torch.set_num_threads(1)
rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 4
policy = torch.nn.Sequential(
    torch.nn.Linear(4, 32), torch.nn.Tanh(), torch.nn.Dropout(0.1), torch.nn.Linear(32, 2)
)
opt = torch.optim.Adam(policy.parameters(), lr=1e-3)
frozen = torch.nn.Sequential(
    torch.nn.Linear(4, 32), torch.nn.BatchNorm1d(32), torch.nn.ReLU(), torch.nn.Linear(32, 2)
)
frozen_opt = torch.optim.SGD(frozen.parameters(), lr=1e-2)


@contextlib.contextmanager
def train_mode(module: torch.nn.Module, enabled: bool):
    """As tianshou.utils.torch_utils.torch_train_mode."""
    was = module.training
    module.train(enabled)
    try:
        yield
    finally:
        module.train(was)


def note() -> None:
    """Just before a forward in a pass: the time of the pass's first one."""
    if first[0] is None:
        first[0] = time.time()


def collect(env: gymnasium.Env, n: int) -> list[np.ndarray]:
    """As tianshou's ``Collector.collect``: the policy in eval mode, called with grad on,
    its action read back on the host, the environment stepped."""
    out = []
    with train_mode(policy, False):
        obs = env.reset(seed=len(out))[0]
        for _ in range(n):
            x = torch.as_tensor(obs)[None]
            note()
            act = policy(x).argmax(-1).detach().cpu().numpy()[0]
            obs, _, term, trunc, _ = env.step(int(act))
            out.append(obs)
            if term or trunc:
                obs = env.reset()[0]
    return out


def update(obs: list[np.ndarray], n: int) -> None:
    global steps
    x = torch.as_tensor(np.stack(obs))
    first = last = called = 0.0
    with train_mode(policy, True):
        for i in range(n):
            opt.zero_grad()
            first = first or time.time()
            logits = policy(x)
            called = called or time.time()
            torch.nn.functional.cross_entropy(logits, (x[:, 2] > 0).long()).backward()
            last = time.time() if i == n - 1 else 0.0
            opt.step()
            steps += 1
    updates.append((first, last, time.time(), called))


def frozen_steps(n: int) -> None:
    """Training in eval mode (its BatchNorm's statistics frozen): no environment, and a
    backward after each forward."""
    global steps
    frozen.eval()
    for _ in range(n):
        x = torch.randn(64, 4)
        frozen_opt.zero_grad()
        torch.nn.functional.cross_entropy(frozen(x), (x[:, 0] > 0).long()).backward()
        frozen_opt.step()
        steps += 1


def evaluate(n: int) -> float:
    """An evaluation in eval mode with grad on (no ``no_grad``), stepping no environment."""
    with train_mode(policy, False):
        return float(sum(policy(torch.randn(256, 4)).sum().item() for _ in range(n)))


def timed(kind: str, fn, *args):
    first[0] = None
    q0 = run_delay()  # (outside the pass's own span)
    t0 = time.time()
    out = fn(*args)
    t1 = time.time()
    passes.append((kind, t0, t1, first[0], run_delay() - q0))
    return out


env, test_env = gymnasium.make("CartPole-v1"), gymnasium.make("CartPole-v1")
# kind, start, end, 1st forward, the time the loop waited for a core meanwhile
passes: list[tuple[str, float, float, float | None, float]] = []
first: list[float | None] = [None]
updates: list[tuple[float, float, float, float]] = []
spans: dict[str, tuple[float, float]] = {}
steps = 0
obs = collect(env, 64)  # before any step: in no step and no interval
for r in range(rounds):
    update(obs, 3)
    obs = timed("rollout", collect, env, 64)
    update(obs, 3)
    if r % 2:
        timed("test", collect, test_env, 48)
        update(obs, 1)
update(obs, 1)
t = time.time()
frozen_steps(12)
spans["frozen"] = (t, time.time())
update(obs, 1)
t = time.time()
evaluate(8)
spans["evaluate"] = (t, time.time())
update(obs, 1)
for _ in range(6):  # as DQN: a few env steps between single updates
    obs = obs[4:] + timed("rollout", collect, env, 4)
    update(obs, 1)
# an evaluation with grad off, then at once a collection: two passes in one stretch
t = time.time()
with torch.no_grad():
    policy.eval()
    float(sum(policy(torch.randn(256, 4)).sum() for _ in range(8)))
    policy.train()
first[0] = None
t1 = time.time()
obs = collect(env, 32)
spans["pair"] = (t, t1, first[0], time.time())
update(obs, 1)
print(json.dumps({"passes": passes, "updates": updates, "steps": steps, "spans": spans}))
