"""The explicit API for loops perftop cannot see: ``perftop.step()`` and ``perftop.phase()``.

Both are no-ops when the job runs without perftop (or with a PERFTOP_SOCKET no monitor
answers on), so code can keep the calls.
"""

from __future__ import annotations

import time
from types import TracebackType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from perftop.hook.state import HookState

_perf = time.perf_counter
_asked = False


def _state() -> HookState | None:
    """The hook; installed on the first call where the bootstrap has not yet (it waits
    for torch: a job may mark steps without it)."""
    global _asked
    from perftop import hook

    st = hook.state()
    if st is None and not _asked:
        _asked = True
        st = hook.install_from_env()
    return st


def step() -> None:
    """Mark the end of a training step (and the start of the next)."""
    st = _state()
    if st is not None and (st.armed or (st.armed is None and st.arm())):
        try:
            st.tracker.explicit(_perf())
        except Exception:
            st.internal_error("perftop.step")


class phase:
    """Time a named part of the current step."""

    __slots__ = ("name", "t0")

    def __init__(self, name: str) -> None:
        self.name = name
        self.t0 = 0.0

    def __enter__(self) -> phase:
        self.t0 = _perf()
        return self

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        st = _state()
        if st is not None and (st.armed or (st.armed is None and st.arm())):
            try:
                st.tracker.phase(self.name, self.t0, _perf())
            except Exception:
                st.internal_error("perftop.phase")
