"""stable-baselines3's PPO on CartPole-v1 (issue 44 item 2), small. Prints what it
computed (a line compared with a plain run's) and then its own counters as JSON: each
rollout's time from a callback's timer (SB3's on_rollout_start/end), its updates, and the
optimizer steps they make."""

import json
import sys
import time

import torch
from stable_baselines3 import PPO
from stable_baselines3.common.callbacks import BaseCallback

N_STEPS, BATCH, EPOCHS = 256, 64, 2
total = int(sys.argv[1]) if len(sys.argv) > 1 else 1024
torch.set_num_threads(1)


class Timer(BaseCallback):
    def __init__(self) -> None:
        super().__init__()
        self.rollouts: list[float] = []
        self.t0 = 0.0

    def _on_rollout_start(self) -> None:
        self.t0 = time.perf_counter()

    def _on_rollout_end(self) -> None:
        self.rollouts.append(time.perf_counter() - self.t0)

    def _on_step(self) -> bool:
        return True


cb = Timer()
model = PPO(
    "MlpPolicy", "CartPole-v1", n_steps=N_STEPS, batch_size=BATCH, n_epochs=EPOCHS,
    seed=0, verbose=0, device="cpu",
)  # fmt: skip
model.learn(total_timesteps=total, callback=cb)
weights = sum(float(p.detach().double().sum()) for p in model.policy.parameters())
print(f"timesteps {model.num_timesteps} updates {model._n_updates} weights {weights:.6f}")
steps = model._n_updates * (N_STEPS // BATCH)  # _n_updates counts epochs
print(json.dumps({"rollouts": cb.rollouts, "updates": model._n_updates, "steps": steps}))
