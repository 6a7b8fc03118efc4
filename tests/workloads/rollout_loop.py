"""A hand-written RL loop (issue 44 item 2): rollouts of a gymnasium environment (a
pendulum integrated in plain Python: CPU work, no torch) between tiny grad-off forwards,
then updates; between updates, an evaluation as nanoGPT's ``estimate_loss`` does it (eval
mode, no loader, forwards back to back) and a rollout of the same pendulum that is not a
gymnasium ``Env`` (its steps are not an environment's to perftop: not claimed); then, as
DQN, a few env steps between single updates; last, a rollout under the user's own
profiler (cProfile: perftop's profile function stays out). Prints
its own timers as JSON (wall clock, as perftop's): each pass after the first update, by
what it was, with its start, its end and its first forward call; each update's time before its first forward, before
its last optimizer step, after it, and after its first forward returned (what lies between two updates is between their
steps: a pass is inside that, begins by the function's first forward, covers its return
and takes about the time from one update's end to the next one's first forward); the
number of optimizer steps.
argv: rounds (default 4)."""

import cProfile
import json
import math
import sys
import time

import gymnasium
import numpy as np
import torch
from core_wait import run_delay

torch.manual_seed(0)
torch.set_num_threads(1)
rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 4
policy = torch.nn.Sequential(torch.nn.Linear(4, 32), torch.nn.Tanh(), torch.nn.Linear(32, 2))
opt = torch.optim.Adam(policy.parameters(), lr=1e-3)
data = torch.randn(4096, 4)


class Pendulum:
    """The environment's dynamics: plain Python."""

    def __init__(self) -> None:
        self.state = [0.0, 0.0, 0.1, 0.0]

    def step(self, action: int) -> list[float]:
        x, v, a, w = self.state
        for _ in range(800):
            f = 1.0 if action else -1.0
            acc = (9.8 * math.sin(a) - math.cos(a) * f) / 1.3
            w += 0.0001 * acc
            a += 0.0001 * w
            v += 0.0001 * f
            x += 0.0001 * v
        self.state = [x, v, a, w]
        return self.state


class PendulumEnv(gymnasium.Env):
    observation_space = gymnasium.spaces.Box(-np.inf, np.inf, (4,), np.float32)
    action_space = gymnasium.spaces.Discrete(2)

    def __init__(self) -> None:
        self.sim = Pendulum()

    def reset(self, *, seed=None, options=None):
        self.sim = Pendulum()
        return np.array(self.sim.state, np.float32), {}

    def step(self, action):
        obs = np.array(self.sim.step(int(action)), np.float32)
        return obs, 1.0, False, False, {}


def note() -> None:
    """Just before a forward in a pass: the time of the pass's first one (where the pass
    perftop sees begins: its function's own lines before it, or a preemption there on a
    busy host, are the next step's). Called on a line of its own: the module call stays
    where it was (the pass is named by the function that makes it)."""
    if first[0] is None:
        first[0] = time.time()


def act(obs: np.ndarray) -> int:
    """The policy's action, as a library's ``predict`` gives it (SB3's DQN): the first
    module call of a rollout is made here, the environment is stepped by the caller."""
    with torch.no_grad():
        x = torch.as_tensor(obs)[None]
        note()
        return int(policy(x).argmax())


def rollout(env, n: int) -> list[np.ndarray]:
    policy.eval()
    obs, out = env.reset()[0], []
    for _ in range(n):
        obs = env.step(act(obs))[0]
        out.append(obs)
    return out


def plain_rollout(sim: Pendulum, n: int) -> None:
    policy.eval()
    for _ in range(n):
        with torch.no_grad():
            x = torch.tensor([sim.state])
            note()
            logits = policy(x)
        sim.step(int(logits.argmax()))


def estimate_loss(iters: int) -> float:
    policy.eval()
    out, seen = 0.0, False
    with torch.no_grad():
        for _ in range(iters):
            ix = torch.randint(len(data), (64,))
            x = data[ix]
            note()
            logits = policy(x)
            seen = seen or sys.getprofile() is not None  # perftop looks into this gap
            out += torch.nn.functional.cross_entropy(logits, (x[:, 0] > 0).long()).item()
    looked.append(seen)
    policy.train()
    return out / iters


def update(obs: list[np.ndarray], n: int) -> None:
    global steps
    policy.train()
    x = torch.as_tensor(np.stack(obs))
    first = last = called = 0.0
    for i in range(n):
        opt.zero_grad()
        first = first or time.time()
        logits = policy(x)
        called = called or time.time()
        torch.nn.functional.cross_entropy(logits, (x[:, 2] > 0).long()).backward()
        last = time.time() if i == n - 1 else 0.0
        opt.step()
        steps += 1
    updates.append((first, last, time.time(), called))


def begin() -> float:
    """A pass's start, by the loop's clock: its first forward not yet made."""
    first[0] = None
    waited[0] = run_delay()  # (outside the pass's own span)
    return time.time()


def done(kind: str, t0: float) -> None:
    t1 = time.time()
    passes.append((kind, t0, t1, first[0], run_delay() - waited[0]))


def timed(kind: str, fn, *args) -> None:
    t0 = begin()
    fn(*args)
    if steps:  # before the first update a pass is in no step and no interval
        done(kind, t0)


env = PendulumEnv()
# kind, start, end, 1st forward, the time the loop waited for a core meanwhile
passes: list[tuple[str, float, float, float | None, float]] = []
waited = [0.0]  # the loop's wait for a core when the pass began
first: list[float | None] = [None]  # the time of the pass's first forward
updates: list[tuple[float, float, float, float]] = []
looked: list[bool] = []  # estimate_loss: whether a profile function was set between forwards
steps = 0
estimate_loss(2)  # as nanoGPT at iter 0: before any step (in no interval); torch warmed up
plain_rollout(Pendulum(), 2)
for _r in range(rounds):
    t0 = begin()
    obs = rollout(env, 48)
    if steps:
        done("rollout", t0)
    update(obs, 2)
    timed("eval", estimate_loss, 60)
    update(obs, 2)
    timed("plain", plain_rollout, Pendulum(), 24)
    update(obs, 2)
for _ in range(6):  # as DQN: a few env steps between single updates, at one site each time
    t0 = begin()
    obs = obs[4:] + rollout(env, 4)
    done("rollout", t0)
    update(obs, 1)
# the profile function perftop may set between forward calls is gone
gone = repr(sys.getprofile())
user = cProfile.Profile()  # the user's own profiler: perftop looks into no gap then
user.enable()
t0 = begin()
obs = obs[8:] + rollout(env, 8)
done("profiled", t0)
update(obs, 1)
kept = sys.getprofile() is user
user.disable()
print(
    json.dumps(
        {
            "passes": passes,
            "updates": updates,
            "steps": steps,
            "profile": gone,
            "kept": kept,
            "looked": looked,
        }
    )
)
