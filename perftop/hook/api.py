"""The explicit API for loops perftop cannot see: ``perftop.step()`` and ``perftop.phase()``.

Both are no-ops when the job runs without perftop (or with a PERFTOP_SOCKET no monitor
answers on), so code can keep the calls.
"""

from __future__ import annotations

import time
from types import TracebackType

_perf = time.perf_counter


def step() -> None:
    """Mark the end of a training step (and the start of the next)."""
    from perftop import hook

    st = hook.state()
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
        from perftop import hook

        st = hook.state()
        if st is not None and (st.armed or (st.armed is None and st.arm())):
            try:
                st.tracker.phase(self.name, self.t0, _perf())
            except Exception:
                st.internal_error("perftop.phase")
