"""Rollouts whose loop does much Python work between the policy's forward calls and the
environment's step, as RLlib's env runner does (its module-to-env and env-to-module
connector pipelines: thousands of small calls an environment step; RLlib 2.60's first
rollout between updates made ~4,400 profile events before its ``env.step``). The module
is called part by part (an encoder, then a head: two top-level module calls, as RLlib's
``forward_exploration``). Each collection after the first update is a rollout named by
the function that steps the environment. Prints the collections after the first update,
the optimizer steps, and the line that steps the environment."""

import inspect
import json

import gymnasium
import numpy as np
import torch

torch.manual_seed(0)
torch.set_num_threads(1)
encoder = torch.nn.Sequential(torch.nn.Linear(4, 32), torch.nn.Tanh())
head = torch.nn.Linear(32, 2)
opt = torch.optim.SGD([*encoder.parameters(), *head.parameters()], lr=1e-3)


class Connector:
    """One piece of a pipeline: a pass over a batch's columns, each column's items by
    small functions (what makes RLlib's connectors call-heavy)."""

    def __init__(self, k: int) -> None:
        self.k = k

    def item(self, key: str, value: float) -> float:
        return value + self.k if key else value

    def column(self, key: str, values: list[float]) -> list[float]:
        return [self.item(key, v) for v in values]

    def __call__(self, batch: dict[str, list[float]]) -> dict[str, list[float]]:
        return {key: self.column(key, values) for key, values in batch.items()}


PIPELINE = [Connector(k) for k in range(40)]  # 40 x 4 columns x 8 items: ~1,500 calls


def to_env(logits: torch.Tensor) -> int:
    batch = {c: [float(v) for v in logits[0]] * 4 for c in ("a", "b", "c", "d")}
    for connector in PIPELINE:
        batch = connector(batch)
    return int(np.argmax(batch["a"][:2]))


def explore(obs: np.ndarray) -> int:
    with torch.no_grad():
        features = encoder(torch.as_tensor(obs)[None])
        return to_env(head(features))


def sample(env: gymnasium.Env, n: int) -> list:
    obs, out = env.reset(seed=0)[0], []
    for _ in range(n):
        obs, _, term, trunc, _ = env.step(explore(obs))
        out.append(obs)
        if term or trunc:
            obs = env.reset()[0]
    return out


env = gymnasium.make("CartPole-v1")
steps = rollouts = 0
for _ in range(6):
    x = torch.as_tensor(np.stack(sample(env, 24)))
    rollouts += steps > 0  # the first, before any update, is in no interval
    for _ in range(3):
        opt.zero_grad()
        head(encoder(x)).logsumexp(-1).mean().backward()
        opt.step()
        steps += 1
src, first = inspect.getsourcelines(sample)
line = first + next(i for i, ln in enumerate(src) if "env.step(" in ln)
print(json.dumps({"steps": steps, "rollouts": rollouts, "line": line}))
