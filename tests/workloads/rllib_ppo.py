"""RLlib's PPO on CartPole, as its users run it (the new API stack, `algo.train()` in a
loop), with the env runner and the learner in the driver process: each iteration samples
(two rollouts of 200 env steps, the policy's forward calls amid them, RLlib's connector
pipelines between), then updates (3 epochs of minibatches). Prints its own counters as
JSON: the optimizer's steps (the job's own step hook), and each `sample()` call's span
(the job's own wrapper around the env runner's method: a timer, nothing changed).
argv: iterations (default 3)."""

import json
import sys
import time

import torch

torch.manual_seed(0)
torch.set_num_threads(1)

import ray  # noqa: E402
from ray.rllib.algorithms.ppo import PPOConfig  # noqa: E402

ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
config = (
    PPOConfig()
    .environment("CartPole-v1")
    .env_runners(num_env_runners=0, rollout_fragment_length=200)
    .learners(num_learners=0)
    .training(train_batch_size_per_learner=400, minibatch_size=100, num_epochs=3)
    .debugging(seed=0)
)
algo = config.build_algo()
steps = [0]
for opt in algo.learner_group._learner._named_optimizers.values():
    opt.register_step_post_hook(lambda *_: steps.__setitem__(0, steps[0] + 1))
runner = algo.env_runner
sample = runner.sample
spans: list[tuple[float, float, int]] = []  # start, end, optimizer steps before it


def timed_sample(*args, **kwargs):
    t0 = time.time()
    out = sample(*args, **kwargs)
    spans.append((t0, time.time(), steps[0]))
    return out


runner.sample = timed_sample
for _ in range(int(sys.argv[1]) if len(sys.argv) > 1 else 3):
    algo.train()
algo.stop()
ray.shutdown()
print(json.dumps({"steps": steps[0], "samples": spans}))
