"""stable-baselines3's DQN on CartPole-v1 (issue 44 item 2), small. Prints what it
computed (a line compared with a plain run's) and then its own counters as JSON: SB3's
updates (``_n_updates``), each ``train()`` call's entry and exit and each rollout's start
and end (SB3's callbacks ``_on_rollout_start/_end``), in epoch seconds (perf_counter
stamps moved by one ``time.time() - perf_counter()`` offset, as perftop's are)."""

import json
import sys

import torch
from sb3_timers import Timer, timed
from stable_baselines3 import DQN

total = int(sys.argv[1]) if len(sys.argv) > 1 else 400
torch.set_num_threads(1)
Timed, trains = timed(DQN)
cb = Timer()
# exploration decays to its floor (5% random actions) before learning starts: nearly every
# rollout of 4 environment steps after it calls the policy
model = Timed(
    "MlpPolicy", "CartPole-v1", learning_starts=100, train_freq=4, gradient_steps=1,
    batch_size=32, exploration_fraction=0.2, target_update_interval=100,
    policy_kwargs={"net_arch": [32, 32]}, seed=0, verbose=0, device="cpu",
)  # fmt: skip
model.learn(total_timesteps=total, callback=cb)
weights = sum(float(p.detach().double().sum()) for p in model.policy.parameters())
print(f"timesteps {model.num_timesteps} updates {model._n_updates} weights {weights:.6f}")
print(json.dumps({"updates": model._n_updates, "trains": trains, "rollouts": cb.rollouts}))
