"""What a pass between steps opened by a forward with grad off spent its time in.

While such a pass is open (first_forward.py's hook watches it), a global forward hook
(torch's public ``register_module_forward_hook(..., always_call=True)``, registered at the
pass's first module call and removed where the pass ends; no torch class or function is
changed) and the pre-hook already there bracket each top-level module call: the pass's
time inside the model's forward calls is measured, the rest is outside them (the loop's
own code between the calls: an environment's steps, a batch's making, ``.item()``).

That share does not name the pass's kind: measured, an RL rollout on CartPole (SB3's PPO)
spends ~75% of its time inside the policy's forward calls, and a small model's
``estimate_loss`` ~45% (its indexing and loss outside the model): it is reported as
evidence, not used to tell them apart.

The pass is named by the user's function that made its first module call (``gaps.site``:
the first frame outside torch and perftop), e.g. ``collect_rollouts
(on_policy_algorithm.py:183)``. The hooks run on the training thread only; another
thread's module calls are not the pass's.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any

_MAX_NAME = 160

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

    def start(self, t: float, site: Any) -> None:
        """The pass's first module call began at ``t`` (its pre-hook), made at ``site``."""
        self.depth, self.t_in, self.fwd_s, self.calls = 1, t, 0.0, 1
        self.site = site
        if self.handle is None:
            try:
                self.handle = self.register(self.post, always_call=True)
            except Exception:
                self.on_error("pass forward hook")

    def pre(self, t: float) -> None:
        """A module call inside the pass began at ``t`` (training thread)."""
        if self.depth == 0:
            self.t_in = t
            self.calls += 1
        self.depth += 1

    def post(self, module: Any, args: Any, out: Any) -> None:
        try:
            if self.depth > 0 and threading.get_ident() == self.thread():
                self.depth -= 1
                if self.depth == 0:
                    self.fwd_s += _perf() - self.t_in
        except Exception:
            self.on_error("pass forward hook")

    def stop(self) -> None:
        h, self.handle = self.handle, None
        self.depth = 0
        if h is not None:
            h.remove()

    def verdict(self, length: float) -> tuple[str, float]:
        """The pass ended after ``length`` seconds: (its site, seconds inside forwards;
        -1 where the hook could not be registered)."""
        measured = self.handle is not None
        self.stop()
        return site_name(self.site), (min(self.fwd_s, length) if measured else -1.0)


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
