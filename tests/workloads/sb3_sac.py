"""stable-baselines3's SAC on Pendulum-v1, small: three optimizers a gradient step (the
entropy coefficient's, the critic's, the actor's), each after its own backward, several
gradient steps between rollouts. Prints what it computed and then its own counters as
JSON (sb3_timers.py): SB3's updates, each ``train()`` call's entry and exit and each
rollout's start and end."""

from sb3_timers import learn
from stable_baselines3 import SAC

# random actions until learning starts; then 10 environment steps (the actor's forward
# with grad off, in predict) between trainings of 3 gradient steps
learn(SAC, "Pendulum-v1", learning_starts=100, train_freq=(10, "step"), gradient_steps=3,
      batch_size=32)  # fmt: skip
