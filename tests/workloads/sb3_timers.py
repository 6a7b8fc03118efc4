"""SB3's own timers, for the rollout tests' workloads (sb3_dqn.py, sb3_sac.py, sb3_td3.py):
each ``train()`` call's entry and exit and each rollout's start and end (SB3's callbacks
``_on_rollout_start/_end``), in epoch seconds (perf_counter stamps moved by one
``time.time() - perf_counter()`` offset, as perftop's are); and the run they share
(:func:`learn`)."""

import json
import sys
import time
from typing import Any

import torch
from stable_baselines3.common.callbacks import BaseCallback

OFFSET = time.time() - time.perf_counter()


def timed(algo: Any) -> tuple[Any, list[tuple[float, float]]]:
    """A subclass of ``algo`` whose ``train()`` calls are timed, and their times."""
    trains: list[tuple[float, float]] = []

    class Timed(algo):  # type: ignore[misc, valid-type]
        def train(self, gradient_steps: int, batch_size: int = 100) -> None:
            t0 = time.perf_counter()
            super().train(gradient_steps, batch_size)
            trains.append((OFFSET + t0, OFFSET + time.perf_counter()))

    return Timed, trains


class Timer(BaseCallback):
    def __init__(self) -> None:
        super().__init__()
        self.rollouts: list[tuple[float, float]] = []
        self.t0 = 0.0

    def _on_rollout_start(self) -> None:
        self.t0 = time.perf_counter()

    def _on_rollout_end(self) -> None:
        self.rollouts.append((OFFSET + self.t0, OFFSET + time.perf_counter()))

    def _on_step(self) -> bool:
        return True


def learn(algo: Any, env: str, **kwargs: Any) -> None:
    """Trains ``algo``'s small MLP policy on ``env`` for argv[1] timesteps (default 400),
    one torch thread, seed 0, its ``train()`` calls and rollouts timed; prints what it
    computed (a line compared with a plain run's), then SB3's updates (``_n_updates``) and
    those timers as JSON."""
    total = int(sys.argv[1]) if len(sys.argv) > 1 else 400
    torch.set_num_threads(1)
    timed_algo, trains = timed(algo)
    cb = Timer()
    model = timed_algo(
        "MlpPolicy", env, policy_kwargs={"net_arch": [32, 32]}, seed=0, verbose=0,
        device="cpu", **kwargs,
    )  # fmt: skip
    model.learn(total_timesteps=total, callback=cb)
    weights = sum(float(p.detach().double().sum()) for p in model.policy.parameters())
    print(f"timesteps {model.num_timesteps} updates {model._n_updates} weights {weights:.6f}")
    print(json.dumps({"updates": model._n_updates, "trains": trains, "rollouts": cb.rollouts}))
