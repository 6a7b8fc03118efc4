"""stable-baselines3's DQN on CartPole-v1 (issue 44 item 2), small. Prints what it
computed and then its own counters as JSON (sb3_timers.py): SB3's updates, each
``train()`` call's entry and exit and each rollout's start and end."""

from sb3_timers import learn
from stable_baselines3 import DQN

# exploration decays to its floor (5% random actions) before learning starts: nearly every
# rollout of 4 environment steps after it calls the policy
learn(
    DQN, "CartPole-v1", learning_starts=100, train_freq=4, gradient_steps=1, batch_size=32,
    exploration_fraction=0.2, target_update_interval=100,
)  # fmt: skip
