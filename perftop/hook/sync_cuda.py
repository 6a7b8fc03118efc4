"""Real host-device syncs on CUDA, from PyTorch's sync debug mode, without its side effects.

The debug mode is checked in C++, so it catches what no Python-level patch can (a sync
deep inside an op). Left on for a whole run it has side effects a plain run lacks: each
sync becomes a ``UserWarning`` that an ``error`` filter (``-W error``, pytest) turns into
an exception out of the op; syncs in C++ calls with no Python frame print to stderr; a
user's own mode is swallowed; and every sync pays for the warnings machinery.

So perftop never leaves it on. In the detector's sampled steps only, and on the training
thread only, the mode is switched to ``warn`` around each torch call the detector sees
(one that Python called, so torch turns the C++ warning into a Python one when the call
returns) and back to 0 right after: :meth:`RealSyncs.call`. Around that call:

- an ``always`` filter for the sync message is first in ``warnings.filters`` (checked
  before each call, put back in front if a user filter went before it), so no ``error``
  filter can turn the sync into an exception, and repeats are not hidden by ``default``;
- ``warnings._showwarnmsg`` (what the interpreter calls to show any warning) drops the
  sync warnings and counts those of the training thread; every other warning goes to the
  original untouched.
- The first switch of the mode in a process makes torch warn once that the mode "is a
  prototype feature" (``TORCH_WARN_ONCE``, turned into a Python warning when the switch
  returns, after the mode is set). The same filter and wrapper take that notice too: on a
  real H100 it was printed into the job's stderr, and under ``-W error`` it raised out of
  the switch with the mode left on, so the job's next sync raised. A switch that raises
  for any reason puts the mode back to 0 before the op runs. The notice is torch's once
  per process: a job that switches the mode itself after a sampled step gets no notice.

``backward`` and ``autograd.grad`` are called with the mode off: their work runs on
autograd's C++ threads, where a sync would print. When the job sets a mode itself (seen
before each call), perftop steps aside for good and says so. The mode is changed through
``torch._C`` directly: ``torch.cuda.set_sync_debug_mode`` would initialize CUDA.
"""

from __future__ import annotations

import re
import threading
import time
import warnings
from collections.abc import Callable
from typing import Any

from perftop.hook import call_site

MESSAGE = "called a synchronizing CUDA operation"
# torch's once-per-process notice at the first switch (torch/csrc/cuda/Module.cpp).
NOTICE = "Synchronization debug mode is a prototype feature"


class RealSyncs:
    def __init__(self, torch: Any, state: Any) -> None:
        self.C = torch._C
        self.state = state
        self.fired = 0  # sync warnings seen on the training thread
        self.thread = threading.get_ident()
        self.aside = False
        self.orig: Any = None
        self.entry: Any = None
        self.mine: Any = None
        self.quiet = (torch.Tensor.backward, torch.autograd.backward, torch.autograd.grad)

    def arm(self) -> None:
        """At a sampled step's start: the filter and the wrapper in (nothing of perftop's
        is in the warnings module between sampled steps)."""
        if self.aside or self.orig is not None:
            return
        orig = self.orig = warnings._showwarnmsg  # type: ignore[attr-defined]
        self.thread = threading.get_ident()  # the detector arms on the training thread
        get_ident = threading.get_ident
        state = self.state

        def _showwarnmsg(msg: Any) -> Any:
            try:
                if self.orig is not None and issubclass(msg.category, UserWarning):
                    text = str(msg.message)
                    if text.startswith(MESSAGE):
                        if get_ident() == self.thread:
                            self.fired += 1
                        return None  # a warning perftop caused: never shown
                    if text.startswith(NOTICE):
                        return None  # torch's notice at perftop's first switch
            except Exception:
                state.internal_error("sync warning")
            return orig(msg)

        self.mine = _showwarnmsg
        warnings._showwarnmsg = _showwarnmsg  # type: ignore[attr-defined]
        if self.entry is None:
            ours = f"{re.escape(MESSAGE)}|{re.escape(NOTICE)}"
            self.entry = ("always", re.compile(ours, re.I), UserWarning, None, 0)
        self.first()

    def first(self) -> None:
        """Our filter first in the list in force now (a user filter may have gone in front
        of it, or ``catch_warnings`` may have swapped the list)."""
        filters: list[Any] = warnings.filters  # type: ignore[assignment]  # a list at run time
        if filters and filters[0] is self.entry:
            return
        try:
            filters.remove(self.entry)
        except ValueError:
            pass
        filters.insert(0, self.entry)
        warnings._filters_mutated()  # type: ignore[attr-defined]

    def step_aside(self, why: str) -> None:
        if self.aside:
            return
        self.aside = True
        self.disarm()
        self.state.sender.note(
            "info",
            f"real sync counting stopped: {why}; perftop leaves CUDA's sync debug mode to "
            "the job (potential sync sites are still sampled)",
        )

    def call(
        self,
        func: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        run: Callable[[Any, tuple[Any, ...], dict[str, Any]], Any] = call_site.plain,
    ) -> Any:
        """``func(*args, **kwargs)`` with the debug mode on, made by ``run`` (from the
        job's line: ``call_site``); returns (result, syncs, s). Only ``func``'s own
        exceptions reach the caller, never perftop's."""
        try:
            on = self.ready(func)
        except Exception:
            self.state.internal_error("sync debug mode")
            on = False
            self.off()  # a switch that raised may have set the mode before it did
        if not on:
            return run(func, args, kwargs), 0, None
        n0 = self.fired
        t0 = time.perf_counter()
        try:
            out = run(func, args, kwargs)
        finally:
            self.off()
        return out, self.fired - n0, time.perf_counter() - t0

    def off(self) -> None:
        try:
            self.C._cuda_set_sync_debug_mode(0)
        except Exception:
            self.state.internal_error("sync debug mode")

    def ready(self, func: Any) -> bool:
        """Switch the mode on for this call, unless it is not ours to switch."""
        if self.orig is None or func in self.quiet:
            return False
        if self.C._cuda_get_sync_debug_mode() != 0:
            self.step_aside("the job set CUDA's sync debug mode itself")
            return False
        self.first()
        self.C._cuda_set_sync_debug_mode(1)
        return True

    def disarm(self) -> None:
        """At a sampled step's end: take out the filter and the wrapper (the wrapper only
        if nobody wrapped it since; else it stays, passing everything on)."""
        if self.orig is None:
            return
        if warnings._showwarnmsg is self.mine:  # type: ignore[attr-defined]
            warnings._showwarnmsg = self.orig  # type: ignore[attr-defined]
        self.orig = None
        try:
            warnings.filters.remove(self.entry)  # type: ignore[attr-defined]  # a list
            warnings._filters_mutated()  # type: ignore[attr-defined]
        except ValueError:
            pass


def attach(torch: Any, state: Any) -> RealSyncs | None:
    """Real-sync counting for CUDA (and ROCm) builds; None elsewhere or when unavailable.
    Installs nothing in the job until a sampled step runs with CUDA initialized."""
    version = torch.version
    if getattr(version, "cuda", None) is None and getattr(version, "hip", None) is None:
        return None
    C = torch._C
    if not hasattr(C, "_cuda_set_sync_debug_mode") or not hasattr(warnings, "_showwarnmsg"):
        return None
    real = RealSyncs(torch, state)
    if C._cuda_get_sync_debug_mode() != 0:
        real.step_aside("the job set CUDA's sync debug mode itself")
    state.undo.append(real.disarm)
    return real
