"""stable-baselines3's PPO on CartPole-v1 (issue 44 item 2), small, with SB3's
``EvalCallback`` evaluating every 384 environment steps (inside the 2nd and 3rd rollouts).
Prints what it computed (a line compared with a plain run's) and then its own counters as
JSON: each rollout's time from a callback's timer (SB3's on_rollout_start/end), each
evaluation's time and the rollout it ran in, its updates, and the optimizer steps they
make."""

import json
import sys
import time

import gymnasium as gym
import torch
from stable_baselines3 import PPO
from stable_baselines3.common.callbacks import BaseCallback, CallbackList, EvalCallback
from stable_baselines3.common.monitor import Monitor

N_STEPS, BATCH, EPOCHS = 256, 64, 2
EVAL_FREQ = 384
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


class TimedEval(EvalCallback):
    """SB3's own EvalCallback (``evaluate_policy`` on an environment of its own, from the
    rollout's environment step), each evaluation timed: (rollout index, seconds)."""

    def __init__(self, timer: Timer) -> None:
        env = Monitor(gym.make("CartPole-v1"))
        super().__init__(env, n_eval_episodes=2, eval_freq=EVAL_FREQ, verbose=0)
        self.timer, self.times = timer, []

    def _on_step(self) -> bool:
        t = time.perf_counter()
        go_on = super()._on_step()
        if self.n_calls % self.eval_freq == 0:
            self.times.append((len(self.timer.rollouts), time.perf_counter() - t))
        return go_on


cb = Timer()
evals = TimedEval(cb)
model = PPO(
    "MlpPolicy", "CartPole-v1", n_steps=N_STEPS, batch_size=BATCH, n_epochs=EPOCHS,
    seed=0, verbose=0, device="cpu",
)  # fmt: skip
model.learn(total_timesteps=total, callback=CallbackList([cb, evals]))
weights = sum(float(p.detach().double().sum()) for p in model.policy.parameters())
print(f"timesteps {model.num_timesteps} updates {model._n_updates} weights {weights:.6f}")
steps = model._n_updates * (N_STEPS // BATCH)  # _n_updates counts epochs
print(
    json.dumps(
        {"rollouts": cb.rollouts, "evals": evals.times, "updates": model._n_updates, "steps": steps}
    )
)
