"""Events of their own types with absurd values never leave the model unable to answer.

A live event is checked against its types (wire_stream.EventReader), but a row of a
probe's sample is a tuple of any JSON values, and numbers may be anything within 64 bits. A
node's monitor at a collector, or a damaged writer, may send such events. The hub says once what the
model could not apply and goes on (tests/test_hub_hostile.py); what it did apply must
never make every later snapshot fail (a process row whose pid was a string did: sorting
the roles raised at each snapshot, and the screen stayed frozen). Events are drawn from
every registered type's own field types."""

from __future__ import annotations

import types
import typing
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from perftop.events import (
    CaptureOps,
    CaptureState,
    GpuSample,
    Hello,
    JobStart,
    ProcSample,
    SessionStart,
    Step,
)
from perftop.events.base import registered
from perftop.events.validate import check
from perftop.hints import hinted_session
from perftop.report.build import build_report

T0 = 1_790_000_000.0
INTS = st.sampled_from([0, 1, -1, 2, 3, 7, 8, 100, 2**31 - 1, -(2**31), 2**62, 2**63 - 1,
                        -(2**63)])  # fmt: skip
FLOATS = st.one_of(INTS, st.sampled_from([0.0, -0.0, 0.5, 1e-300, 1e300, -1e300, 5e-324, T0,
                                          T0 + 5, 1e18, 2.0**63]))  # fmt: skip
STRS = st.sampled_from(["", "x", "eval", "main", "worker", "cpu", "\x1b[2J", "\u202e", "0",
                        "default_pg", "all_reduce", "backward", "a" * 300])  # fmt: skip
JSON = st.recursive(st.one_of(st.none(), INTS, FLOATS, STRS, st.booleans()),
                    lambda kids: st.lists(kids, max_size=4), max_leaves=12)  # fmt: skip


def of(tp: Any) -> st.SearchStrategy[Any]:
    """Values of a field's declared type (what the reader's check lets through)."""
    if tp is int:
        return INTS
    if tp is float:
        return FLOATS
    if tp is bool:
        return st.booleans()
    if tp is str:
        return STRS
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        opts = [of(a) for a in args if a is not type(None)]
        return st.one_of(*opts, *([st.none()] if type(None) in args else []))
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return st.lists(of(args[0]), max_size=5).map(tuple)
        return st.tuples(*(of(a) for a in args))
    if origin is dict:
        return st.dictionaries(of(args[0]), of(args[1]), max_size=3)
    return JSON


CLASSES = [c for _tag, c in sorted(registered().items())]


@st.composite
def events(draw: st.DrawFn) -> list[Any]:
    out = []
    for _ in range(draw(st.integers(1, 10))):
        cls = draw(st.sampled_from(CLASSES))
        hints = typing.get_type_hints(cls)
        ev = cls(*[draw(of(hints[f])) for f in cls._FIELDS])
        check(ev)  # what a live reader lets through
        out.append(ev)
    return out


@settings(max_examples=150, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])  # fmt: skip
@given(drawn=events())
@example(drawn=[ProcSample(T0 + 9, 1.0, 7, (("x",),))])  # found by the campaign: a str pid
@example(drawn=[GpuSample(T0 + 9, ((None, ["x"]), (1.5, [[1, 2, 3]])))])  # no index
@example(drawn=[ProcSample(T0 + 9, 1.0, 7, ((8, 7, "python", "running", [1], None, "x"),))])
@example(drawn=[CaptureState(0, 0, "", "", "", 0, 0),  # a capture's cost error of after_n -2**63
                CaptureOps(0, 0, "", 0, 1, 0.0, 1.0, {}, before_n=3, after_n=-(2**63),
                           before_sd_s=1.0)])  # fmt: skip
def test_absurd_events_never_stop_the_snapshots_or_the_report(drawn: list[Any]) -> None:
    s = hinted_session()
    steps = [Step(7, i, T0 + i, T0 + i + 0.5, 0.1, 0.1, 0.01) for i in range(30)]
    head = [SessionStart(T0, ("python", "x.py"), "/w", "h", 1, "0.1"),
            JobStart(T0, 7, ("python", "x.py")), Hello(T0, 7, 1, "h", ("x.py",), 0, 0, 2)]  # fmt: skip
    for ev in [*head, *steps[:20], *drawn, *steps[20:]]:
        try:
            s.apply(ev)
        except Exception:
            pass  # the hub says it once and goes on
    s.snapshot(now=T0 + 40)
    build_report(s.snapshot(window=None))
