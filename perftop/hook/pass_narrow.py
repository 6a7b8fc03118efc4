"""A pass's forward calls without torch's hooked path for every module inside them.

While a pass opened by a forward with grad off is open, perftop needs two things of each
of its top-level forward calls: where it begins (the global forward pre-hook: the pass
ends at the next forward with grad on) and where it returns (the global forward hook:
the pass's time inside forward calls). A global module hook sends *every* module call
through ``Module._call_impl``'s hooked path, ~5 µs each before any hook runs: a small
policy's forward of 7 modules took twice its time, an evaluation or an RL rollout up to
1.75 times (``benchmarks/pass_cost.py``).

So once a top-level forward call of the pass begins (its pre-hook, on the training
thread), both global hooks are taken out of torch's tables for as long as it runs, and
that one module gets a forward hook of its own (``always_call``: on an exception too)
under a fixed key, which puts them back and takes itself out where the call returns
(where the call raised, torch loops over that very table: the key goes at the next
top-level call or the pass's end). The modules inside it take torch's plain path. While
the call runs, the module's own table holds the key (a job that reads its module's hooks
from inside its forward sees it); nothing of torch's is replaced, and the job's own hooks
run as before, in their order.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import Any

MODULE_KEY = -0x7065_7268  # perftop's key in a module's own forward-hook table


class Narrow:
    def __init__(
        self,
        lift: Callable[[], None],
        relay: Callable[[], None],
        post: Callable[[Any, Any, Any], None],
        thread: Callable[[], int],
        on_error: Callable[[str], None],
    ) -> None:
        self.lift = lift  # both global hooks out of torch's tables
        self.relay = relay  # ... and back in
        self.post = post  # what the global forward hook does where the call returns
        self.thread = thread  # the training thread's ident
        self.on_error = on_error
        self.module: Any = None  # the top-level module whose call runs narrowed
        self.stale: Any = None  # a module still holding the key (its call returned)

    def enter(self, module: Any) -> None:
        """A top-level forward call of the pass began (its global pre-hook): narrowed
        until it returns; left as it is where that module's tables are not torch's dicts."""
        self.clean()
        hooks = getattr(module, "_forward_hooks", None)
        always = getattr(module, "_forward_hooks_always_called", None)
        if not isinstance(hooks, dict) or not isinstance(always, dict) or MODULE_KEY in hooks:
            return
        hooks[MODULE_KEY] = self.returned
        always[MODULE_KEY] = True
        self.module = module
        self.lift()

    def returned(self, module: Any, args: Any, out: Any) -> None:
        """The module's own forward hook: its call returned (or raised)."""
        try:
            if module is not self.module or threading.get_ident() != self.thread():
                return  # a later call of a module that kept the key, or another thread's
            self.module = None
            self.relay()
            self.post(module, args, out)
            if sys.exc_info()[1] is None:
                _pop(module)  # a call that returned: torch loops over a copy of the table
            else:  # raised: torch loops over the table itself; out at the next chance
                self.stale = module
        except Exception:
            self.on_error("pass forward hook")

    def clean(self) -> None:
        """The key out of a module whose call raised (never from inside its own hook:
        torch loops over that table then)."""
        m, self.stale = self.stale, None
        if m is not None:
            _pop(m)

    def cancel(self) -> None:
        """The pass's hooks go (the pass ended, or perftop's hooks are off): the key out,
        and the global hooks left out (their owners take them out anyway)."""
        m, self.module = self.module, None
        if m is not None:
            _pop(m)
        self.clean()


def _pop(module: Any) -> None:
    module._forward_hooks.pop(MODULE_KEY, None)
    module._forward_hooks_always_called.pop(MODULE_KEY, None)
