"""stable-baselines3's DQN on CartPole-v1 with its ``CheckpointCallback`` saving the model
(a zip: its parameters through ``torch.save``, the rest serialized by SB3 itself) and the
replay buffer (a pickle, no torch.save) every 100 environment steps. Each save timed by
the job (the callback's whole save). Prints its updates and the saves' times as JSON."""

import json
import sys
import tempfile
import time

import torch
from stable_baselines3 import DQN
from stable_baselines3.common.callbacks import CheckpointCallback


class Timed(CheckpointCallback):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.saves: list[float] = []

    def _on_step(self) -> bool:
        t = time.perf_counter()
        go_on = super()._on_step()
        if self.n_calls % self.save_freq == 0:
            self.saves.append(time.perf_counter() - t)
        return go_on


torch.set_num_threads(1)
total = int(sys.argv[1]) if len(sys.argv) > 1 else 600
model = DQN("MlpPolicy", "CartPole-v1", policy_kwargs={"net_arch": [32, 32]}, seed=0, verbose=0,
            device="cpu", learning_starts=50, train_freq=4, buffer_size=50_000)  # fmt: skip
cb = Timed(save_freq=100, save_path=tempfile.mkdtemp(), save_replay_buffer=True)
model.learn(total_timesteps=total, callback=cb)
print(json.dumps({"updates": model._n_updates, "save_s": cb.saves}))
