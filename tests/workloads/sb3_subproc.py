"""stable-baselines3's PPO on two CartPole environments, each in a process of its own
(``SubprocVecEnv``, started through multiprocessing's forkserver): the rollouts step them
through pipes. Prints its own counters: the optimizer's steps (its step hook) and the
rollouts (its callback), and the environments' pids."""

import json

import torch
from stable_baselines3 import PPO
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import SubprocVecEnv

torch.set_num_threads(1)


class Rollouts(BaseCallback):
    def __init__(self) -> None:
        super().__init__()
        self.n = 0

    def _on_rollout_end(self) -> None:
        self.n += 1

    def _on_step(self) -> bool:
        return True


if __name__ == "__main__":
    env = make_vec_env("CartPole-v1", n_envs=2, vec_env_cls=SubprocVecEnv)
    pids = [r.pid for r in env.processes]
    model = PPO("MlpPolicy", env, n_steps=128, batch_size=64, n_epochs=2, seed=0)
    steps = [0]
    model.policy.optimizer.register_step_post_hook(lambda *_: steps.__setitem__(0, steps[0] + 1))
    rollouts = Rollouts()
    model.learn(total_timesteps=2560, callback=rollouts)
    env.close()
    print(json.dumps({"steps": steps[0], "rollouts": rollouts.n, "envs": pids}))
