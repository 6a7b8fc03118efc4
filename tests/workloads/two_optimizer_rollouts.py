"""An actor-critic's shape: two optimizers an iteration (the first closes the steps), then
a rollout that steps an environment. argv[1]: ``eval_mode`` (the policy in eval mode,
grad on: tianshou's collectors), ``no_grad`` (under ``torch.no_grad()``), or ``after_eval``
(every 5th iteration an evaluation over a DataLoader under ``no_grad``, then at once an
eval-mode rollout: no step between). Prints its own counts as JSON: iterations, rollouts,
evaluations."""

import json
import sys

import gymnasium
import torch

torch.manual_seed(0)
torch.set_num_threads(1)
shape = sys.argv[1]
net = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.Tanh(), torch.nn.Linear(32, 8))
params = list(net.parameters())
actor, critic = torch.optim.SGD(params[:2], lr=1e-3), torch.optim.Adam(params[2:], lr=1e-4)
obs_bank = torch.randn(64, 8)


class Env(gymnasium.Env):
    def reset(self, *, seed=None, options=None):
        self.t = 0
        return obs_bank[0], {}

    def step(self, action):
        self.t += 1
        return obs_bank[self.t % 64] + 0 * action.sum(), 0.0, False, False, {}


env = Env()
val = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(obs_bank), batch_size=22)
X, Y = torch.randn(640, 8), torch.randn(640, 8)
own = {"iterations": 0, "rollouts": 0, "evaluations": 0}
for i in range(40):
    xb, yb = X[i * 8 : (i + 1) * 8], Y[i * 8 : (i + 1) * 8]
    for opt in (actor, critic):
        opt.zero_grad()
        torch.nn.functional.mse_loss(net(xb), yb).backward()
        opt.step()
    own["iterations"] += 1
    if shape == "after_eval" and i % 5 != 4:
        continue
    if shape == "after_eval":
        with torch.no_grad():
            for (xv,) in val:
                net(xv)
        own["evaluations"] += 1
    obs = env.reset()[0]
    net.eval()
    with torch.no_grad() if shape == "no_grad" else torch.enable_grad():
        for _ in range(6):
            obs = env.step(net(obs[None])[0])[0]
    net.train()
    own["rollouts"] += 1
print(json.dumps(own))
