"""stable-baselines3's TD3 on Pendulum-v1, small: the critic's optimizer every gradient
step, the actor's every second (``policy_delay``), the target networks' forward with grad
off at each gradient step's start, several gradient steps between rollouts. Prints what
it computed and then its own counters as JSON (sb3_timers.py): SB3's updates, each
``train()`` call's entry and exit and each rollout's start and end."""

from sb3_timers import learn
from stable_baselines3 import TD3

# random actions until learning starts; then 10 environment steps (the actor's forward
# with grad off, in predict) between trainings of 4 gradient steps
learn(TD3, "Pendulum-v1", learning_starts=100, train_freq=(10, "step"), gradient_steps=4,
      batch_size=32)  # fmt: skip
