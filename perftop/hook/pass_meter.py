"""What a pass between steps opened by a forward with grad off spent its time in.

While such a pass is open (first_forward.py's hook watches it), a global forward hook
(torch's public ``register_module_forward_hook(..., always_call=True)``, registered at the
pass's first module call and removed where the pass ends; no torch class or function is
changed) and the pre-hook already there bracket each top-level module call: the pass's
time inside the model's forward calls is measured, the rest is outside them (the loop's
own code between the calls: an environment's steps, a batch's making, ``.item()``).

That share does not name the pass's kind: measured, an RL rollout on CartPole (SB3's PPO)
spends ~75% of its time inside the policy's forward calls, and a small model's
``estimate_loss`` ~45% (its indexing and loss outside the model). What does is what runs
between the calls: where the process has imported an environment library (gymnasium, gym,
stable-baselines3), the first :data:`GAPS` stretches between two top-level forward calls
of each pass are watched by a profile function (``sys.setprofile``, only where none is
set, on the training thread, removed at the next forward call or as soon as it has seen
enough, or after :data:`EVENTS` calls) for a call of ``step`` on an environment (an instance of gymnasium's or gym's
``Env`` or ``VectorEnv``, or SB3's ``VecEnv``). A pass whose forward calls alternate with
an environment's steps, with no DataLoader batch in it, is a ``rollout`` (SB3's
``evaluate_policy`` is one too: the function names it); any other stays ``eval``. A
site whose pass was a rollout is a pass each time (``rollout_sites``, read by
``gaps.region_enter``), even after every step (DQN's few env steps between updates).

The pass is named by the user's function that made its first module call (``gaps.site``:
the first frame outside torch and perftop), e.g. ``collect_rollouts
(on_policy_algorithm.py:202)``. The hooks run on the training thread only; another
thread's module calls are not the pass's.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import Any

GAPS = 4  # stretches between forward calls looked into per pass
EVENTS = 2048  # profile events looked at per pass, at most (a call-heavy loop's cost bound)
ROLLOUT = "rollout"
# Environment classes (module, name), looked up in sys.modules only (never imported).
ENVS = (
    ("gymnasium.core", "Env"),
    ("gymnasium.vector.vector_env", "VectorEnv"),
    ("gym.core", "Env"),
    ("gym.vector.vector_env", "VectorEnv"),
    ("stable_baselines3.common.vec_env.base_vec_env", "VecEnv"),
)
_MAX_NAME = 160
MAX_SITES = 64

_perf = time.perf_counter


class PassMeter:
    def __init__(self, register: Any, thread: Any, on_error: Any) -> None:
        self.register = register  # torch's register_module_forward_hook
        self.thread = thread  # callable: the training thread's ident
        self.on_error = on_error
        self.handle: Any = None
        self.depth = 0
        self.t_in = 0.0
        self.fwd_s = 0.0
        self.calls = 0
        self.site: Any = None
        self.batch = False  # a DataLoader batch in the pass
        self.env = False  # an environment's step() between its forward calls
        self.envs: tuple[type, ...] = ()
        self.gaps_left = 0
        self.events_left = 0
        self.rollout_sites: set[Any] = set()  # sites whose pass was a rollout (gaps.py)
        self.profiling = False
        self.measured = False  # the forward hook was registered for this pass

    def start(self, t: float, site: Any) -> None:
        """The pass's first module call began at ``t`` (its pre-hook), made at ``site``."""
        self.depth, self.t_in, self.fwd_s, self.calls = 1, t, 0.0, 1
        self.site = site
        self.batch = self.env = False
        self.envs = env_types()
        self.gaps_left = GAPS if self.envs else 0
        self.events_left = EVENTS
        if self.handle is None:
            try:
                self.handle = self.register(self.post, always_call=True)
            except Exception:
                self.on_error("pass forward hook")
        self.measured = self.handle is not None

    def pre(self, t: float) -> None:
        """A module call inside the pass began at ``t`` (training thread)."""
        if self.depth == 0:
            if self.profiling:
                self.unprofile()
            self.t_in = t
            self.calls += 1
        self.depth += 1

    def post(self, module: Any, args: Any, out: Any) -> None:
        try:
            if self.depth > 0 and threading.get_ident() == self.thread():
                self.depth -= 1
                if self.depth == 0:
                    self.fwd_s += _perf() - self.t_in
                    if self.gaps_left > 0 and not self.env and sys.getprofile() is None:
                        self.gaps_left -= 1
                        self.profiling = True
                        sys.setprofile(self.prof)
        except Exception:
            self.on_error("pass forward hook")

    def prof(self, frame: Any, event: str, arg: Any) -> None:
        """The profile function between two forward calls: an environment's ``step``?"""
        try:
            self.events_left -= 1
            if self.events_left <= 0:
                self.gaps_left = 0  # this pass's budget is spent: no more gaps watched
            if not self.profiling or self.events_left <= 0:
                self.unprofile()
            elif (
                event == "call"
                and frame.f_code.co_name == "step"
                and isinstance(frame.f_locals.get("self"), self.envs)
            ):
                self.env = True
                self.unprofile()
        except Exception:
            self.profiling = False
            self.on_error("pass profile")

    def unprofile(self) -> None:
        """Off; removed here where this is the training thread (else at its next event)."""
        self.profiling = False
        if threading.get_ident() == self.thread() and sys.getprofile() == self.prof:
            sys.setprofile(None)

    def stop(self) -> None:
        h, self.handle = self.handle, None
        self.depth = 0
        self.unprofile()
        if h is not None:
            h.remove()

    def verdict(self, length: float, eval_kind: str) -> tuple[str, str, float]:
        """The pass ended after ``length`` seconds: (its kind, its site, seconds inside
        forward calls; -1 where the hook could not be registered)."""
        measured = self.measured
        self.stop()
        kind = ROLLOUT if self.env and not self.batch else eval_kind
        if kind == ROLLOUT and self.site is not None and len(self.rollout_sites) < MAX_SITES:
            self.rollout_sites.add(self.site)  # a pass each time, even after every step
        fwd = min(self.fwd_s, length) if measured else -1.0
        return kind, site_name(self.site), fwd


def env_types() -> tuple[type, ...]:
    """The environment classes of the libraries this process has imported."""
    out = []
    for mod, name in ENVS:
        m = sys.modules.get(mod)
        cls = getattr(m, name, None) if m is not None else None
        if isinstance(cls, type):
            out.append(cls)
    return tuple(out)


def site_name(site: Any) -> str:
    """``function (file.py:line)`` for a site from ``gaps.site`` ((code, instruction))."""
    if site is None:
        return ""
    code, lasti = site
    line = code.co_firstlineno
    for start, end, ln in code.co_lines():
        if start <= lasti < end and ln is not None:
            line = ln
            break
    name = f"{code.co_name} ({os.path.basename(code.co_filename)}:{line})"
    return name[:_MAX_NAME]
