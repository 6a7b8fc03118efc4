"""stable-baselines3's TD3 on Pendulum-v1, small: the critic's optimizer every gradient
step, the actor's every second (``policy_delay``), the target networks' forward with grad
off at each gradient step's start, several gradient steps between rollouts. Prints what
it computed (a line compared with a plain run's) and then its own counters as JSON:
SB3's updates, each ``train()`` call's entry and exit and each rollout's start and end
(tests/workloads/sb3_timers.py)."""

import json
import sys

import torch
from sb3_timers import Timer, timed
from stable_baselines3 import TD3

total = int(sys.argv[1]) if len(sys.argv) > 1 else 400
torch.set_num_threads(1)
Timed, trains = timed(TD3)
cb = Timer()
# random actions until learning starts; then 10 environment steps (the actor's forward
# with grad off, in predict) between trainings of 4 gradient steps
model = Timed(
    "MlpPolicy", "Pendulum-v1", learning_starts=100, train_freq=(10, "step"),
    gradient_steps=4, batch_size=32, policy_kwargs={"net_arch": [32, 32]}, seed=0,
    verbose=0, device="cpu",
)  # fmt: skip
model.learn(total_timesteps=total, callback=cb)
weights = sum(float(p.detach().double().sum()) for p in model.policy.parameters())
print(f"timesteps {model.num_timesteps} updates {model._n_updates} weights {weights:.6f}")
print(json.dumps({"updates": model._n_updates, "trains": trains, "rollouts": cb.rollouts}))
