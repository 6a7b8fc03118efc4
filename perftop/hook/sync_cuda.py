"""Real host-device syncs on CUDA, from PyTorch's sync debug mode.

The debug mode is checked in C++, so it catches what no Python-level patch can (an
``int(t)`` deep in a kernel launcher). It reports each sync as a ``UserWarning`` whose
text starts with :data:`MESSAGE`. perftop counts those warnings and hides them, and
leaves every other warning alone:

- an ``always`` filter for that one message sits first in ``warnings.filters`` (the
  default action would show, and so count, a site only once); it is put back in front at
  each step end should the user's own filters have been inserted before it;
- ``warnings._showwarnmsg``, the function the interpreter calls to show any warning, is
  wrapped: a sync warning is counted and dropped, anything else goes to the original
  untouched, so the user's ``showwarning`` and ``catch_warnings(record=True)`` still see
  exactly their own warnings.

The mode is switched on through ``torch._C`` directly: ``torch.cuda.set_sync_debug_mode``
would initialize CUDA in jobs that never use it. A job that set a mode itself is left as
it is.
"""

from __future__ import annotations

import re
import sys
import warnings
from typing import Any

MESSAGE = "called a synchronizing CUDA operation"


class SyncWarnings:
    def __init__(self, collector: Any, state: Any) -> None:
        self.collector = collector
        self.state = state
        self.orig: Any = None
        self.entry: Any = None

    def install(self) -> None:
        orig = self.orig = warnings._showwarnmsg  # type: ignore[attr-defined]
        sync_at = self.collector.sync_at
        state = self.state

        def _showwarnmsg(msg: Any) -> Any:
            try:
                if issubclass(msg.category, UserWarning) and str(msg.message).startswith(MESSAGE):
                    sync_at(sys._getframe(1))
                    return None
            except Exception:
                state.internal_error("sync warning")
            return orig(msg)

        warnings._showwarnmsg = _showwarnmsg  # type: ignore[attr-defined]
        warnings.filterwarnings("always", message=re.escape(MESSAGE), category=UserWarning)
        self.entry = warnings.filters[0]

    def keep_first(self) -> None:
        """At a step end: our filter first again, if a user filter went in front of it."""
        filters = warnings.filters
        if filters and filters[0] is not self.entry:
            try:
                filters.remove(self.entry)
            except ValueError:
                pass
            filters.insert(0, self.entry)
            warnings._filters_mutated()  # type: ignore[attr-defined]

    def uninstall(self) -> None:
        if self.orig is not None:
            warnings._showwarnmsg = self.orig  # type: ignore[attr-defined]
        try:
            warnings.filters.remove(self.entry)
            warnings._filters_mutated()  # type: ignore[attr-defined]
        except ValueError:
            pass


def attach(torch: Any, collector: Any, state: Any) -> SyncWarnings | None:
    """Count real syncs on CUDA (and ROCm) builds; None elsewhere or when unavailable."""
    version = torch.version
    if getattr(version, "cuda", None) is None and getattr(version, "hip", None) is None:
        return None
    C = torch._C
    if not hasattr(C, "_cuda_set_sync_debug_mode") or not hasattr(warnings, "_showwarnmsg"):
        return None
    if C._cuda_get_sync_debug_mode() != 0:
        return None  # the user asked for warnings (or errors) of their own
    w = SyncWarnings(collector, state)
    w.install()
    C._cuda_set_sync_debug_mode(1)

    def undo() -> None:
        C._cuda_set_sync_debug_mode(0)
        w.uninstall()

    state.undo.append(undo)
    return w
