"""SB3's own timers, for the rollout tests' workloads (sb3_dqn.py, sb3_sac.py): each
``train()`` call's entry and exit and each rollout's start and end (SB3's callbacks
``_on_rollout_start/_end``), in epoch seconds (perf_counter stamps moved by one
``time.time() - perf_counter()`` offset, as perftop's are)."""

import time
from typing import Any

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
