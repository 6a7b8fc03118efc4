"""A hand-written RL-like loop (issue 44 item 2): rollouts of env-like CPU work between
tiny grad-off forwards, then updates; and, after some updates, an evaluation as nanoGPT's
``estimate_loss`` does it (eval mode, no loader, forwards back to back). Prints its own
timers as JSON: each pass's kind and length, and the number of optimizer steps.
argv: rounds (default 4)."""

import json
import math
import sys
import time

import torch

torch.manual_seed(0)
torch.set_num_threads(1)
rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 4
policy = torch.nn.Sequential(torch.nn.Linear(4, 32), torch.nn.Tanh(), torch.nn.Linear(32, 2))
opt = torch.optim.Adam(policy.parameters(), lr=1e-3)
data = torch.randn(4096, 4)


def env_step(state: list[float], action: int) -> list[float]:
    """A pendulum integrated in plain Python: the environment's CPU work, no torch."""
    x, v, a, w = state
    for _ in range(300):
        f = 1.0 if action else -1.0
        acc = (9.8 * math.sin(a) - math.cos(a) * f) / 1.3
        w += 0.0001 * acc
        a += 0.0001 * w
        v += 0.0001 * f
        x += 0.0001 * v
    return [x, v, a, w]


def rollout(n: int) -> list[list[float]]:
    policy.eval()
    state, obs = [0.0, 0.0, 0.1, 0.0], []
    for _ in range(n):
        with torch.no_grad():
            logits = policy(torch.tensor([state]))
        action = int(logits.argmax())
        state = env_step(state, action)
        obs.append(state)
    return obs


def estimate_loss(iters: int) -> float:
    policy.eval()
    out = 0.0
    with torch.no_grad():
        for _ in range(iters):
            ix = torch.randint(len(data), (64,))
            x = data[ix]
            out += torch.nn.functional.cross_entropy(policy(x), (x[:, 0] > 0).long()).item()
    policy.train()
    return out / iters


passes, steps = [], 0
for r in range(rounds):
    t0 = time.perf_counter()
    obs = rollout(64)
    passes.append(("rollout", time.perf_counter() - t0))
    policy.train()
    x = torch.tensor(obs)
    for _ in range(4):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(policy(x), (x[:, 2] > 0).long()).backward()
        opt.step()
        steps += 1
    if r % 2 == 1:
        t0 = time.perf_counter()
        estimate_loss(40)
        passes.append(("eval", time.perf_counter() - t0))
print(json.dumps({"passes": passes, "steps": steps}), flush=True)
