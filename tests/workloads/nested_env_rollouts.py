"""Rollouts whose environment is a wrapper that calls a module inside its ``step`` (as
torchrl's transforms are modules, applied inside ``EnvBase.step``): each collection steps
the environment first, so its pass's first module call is inside the wrapper's ``step``,
and the first step the pass sees is the inner environment's, called by the wrapper. The
rollout is named by the loop that steps the wrapper, not by the wrapper.
Prints the line of ``collect`` that steps the environment, and the optimizer steps."""

import inspect
import json

import gymnasium
import numpy as np
import torch

torch.manual_seed(0)
torch.set_num_threads(1)
policy = torch.nn.Sequential(torch.nn.Linear(4, 32), torch.nn.Tanh(), torch.nn.Linear(32, 2))
opt = torch.optim.SGD(policy.parameters(), lr=1e-3)


class ScaledActions(gymnasium.Wrapper):
    """An action transform that is a module, applied inside the wrapper's ``step``."""

    def __init__(self, env: gymnasium.Env) -> None:
        super().__init__(env)
        self.scale = torch.nn.Identity()

    def step(self, action):
        action = int(self.scale(torch.tensor([float(action)])).item())
        return self.env.step(action)


def collect(env: gymnasium.Env, n: int) -> list:
    out, action = [], 0
    env.reset(seed=0)
    with torch.no_grad():
        for _ in range(n):
            obs, _, term, trunc, _ = env.step(action)
            out.append(obs)
            action = int(policy(torch.as_tensor(obs)[None]).argmax())
            if term or trunc:
                env.reset()
    return out


env = ScaledActions(gymnasium.make("CartPole-v1"))
steps = 0
for _ in range(6):
    x = torch.as_tensor(np.stack(collect(env, 40)))
    for _ in range(3):
        opt.zero_grad()
        policy(x).logsumexp(-1).mean().backward()
        opt.step()
        steps += 1
src, first = inspect.getsourcelines(collect)
line = first + next(i for i, ln in enumerate(src) if "obs, _, term" in ln)
print(json.dumps({"steps": steps, "line": line}))
