"""The CUDA path against a faithful fake (this machine has no GPU).

PyTorch's sync debug mode raises, from C++, a ``UserWarning`` with the text below,
reported at the Python frame running when the op was called. The fake emits exactly
that: as a C-level call straight from user code (``functools.partial`` of the C
``warnings.warn``, so no Python frame is pushed, like ``t.item()``), and from a Python
function whose code lives in torch's package directory (like ``torch.functional``).
"""

from __future__ import annotations

import functools
import os
import sys
import types
import warnings

import pytest
import torch

from perftop.hook import frames, sync_cuda
from perftop.hook.sync import Collector

TORCH_TEXT = (
    "called a synchronizing CUDA operation "
    "(Triggered internally at /pytorch/c10/cuda/CUDAFunctions.cpp:148.)"
)
# A C op called directly from user code: warns without a Python frame of its own.
c_level_op = functools.partial(warnings.warn, TORCH_TEXT, UserWarning)

_src = """
import warnings
def torch_internal_op(text):
    warnings.warn(text, UserWarning, stacklevel=1)
"""
_ns: dict = {}
exec(compile(_src, os.path.join(os.path.dirname(torch.__file__), "_fake_sync_op.py"), "exec"), _ns)
torch_internal_op = _ns["torch_internal_op"]


class FakeState:
    def __init__(self) -> None:
        self.undo: list = []
        self.errors: list[str] = []

    def internal_error(self, where: str) -> None:
        self.errors.append(where)


def fake_torch(mode: int = 0) -> types.SimpleNamespace:
    box = {"mode": mode}
    c = types.SimpleNamespace(
        _cuda_get_sync_debug_mode=lambda: box["mode"],
        _cuda_set_sync_debug_mode=lambda m: box.__setitem__("mode", m),
    )
    return types.SimpleNamespace(
        version=types.SimpleNamespace(cuda="12.4", hip=None), _C=c, box=box
    )


@pytest.fixture
def captured():
    """A collector wired the way the hook wires it, undone afterwards."""
    frames.configure()
    events: list = []
    col = Collector(events.append, lambda: 1234)
    st = FakeState()
    with warnings.catch_warnings():
        t = fake_torch()
        w = sync_cuda.attach(t, col, st)
        assert w is not None and t.box["mode"] == 1
        yield col, events, w, st
        for fn in reversed(st.undo):
            fn()
        assert t.box["mode"] == 0


def helper_that_syncs():
    return torch_internal_op(TORCH_TEXT)  # helper line


def test_counts_attributes_and_hides(captured, capsys):
    col, events, w, st = captured
    with warnings.catch_warnings(record=True) as seen:
        for _ in range(5):
            c_level_op()  # direct line
            torch_internal_op(TORCH_TEXT)  # via torch line
            helper_that_syncs()
    col.flush(7, False)
    (batch,) = events
    assert batch.step == 7 and not batch.sampled
    lines = {s[2]: s for s in batch.sites}
    with open(__file__) as fh:
        here = fh.read().splitlines()
    direct = here.index("            c_level_op()  # direct line") + 1
    via = here.index("            torch_internal_op(TORCH_TEXT)  # via torch line") + 1
    helper = here.index("    return torch_internal_op(TORCH_TEXT)  # helper line") + 1
    assert set(lines) == {direct, via, helper}
    for _op, file, _line, _func, kind, count, blocked in lines.values():
        assert file == __file__ and kind == "sync" and count == 5 and blocked is None
    assert (
        lines[direct][0] == "c_level_op" and lines[direct][3] == "test_counts_attributes_and_hides"
    )
    assert lines[via][0] == "torch_internal_op"
    assert lines[helper][3] == "helper_that_syncs"
    assert seen == []  # the user's own recording never sees perftop's warnings
    out = capsys.readouterr()
    assert "synchronizing" not in out.err + out.out
    assert st.errors == []


def test_user_warnings_untouched(captured):
    col, events, w, st = captured
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        warnings.warn("user warning one", UserWarning, stacklevel=1)
        c_level_op()
        warnings.warn("user deprecation", DeprecationWarning, stacklevel=1)
    assert [str(m.message) for m in seen] == ["user warning one", "user deprecation"]
    shown: list[str] = []

    def my_showwarning(message, category, filename, lineno, file=None, line=None):
        shown.append(str(message))

    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = my_showwarning
        warnings.warn("via user hook", stacklevel=1)
        c_level_op()
    assert shown == ["via user hook"]
    col.flush(0, False)
    assert sum(s[5] for s in events[0].sites) == 2


def test_user_error_filter_cannot_turn_syncs_into_errors(captured):
    col, events, w, st = captured
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # goes in front of perftop's filter
        w.keep_first()  # what the hook does at the next step end
        c_level_op()  # must neither raise nor print
        with pytest.raises(UserWarning):
            warnings.warn("the user's own warnings do raise", stacklevel=1)
    col.flush(0, False)
    assert events[0].sites[0][5] == 1


def test_default_action_would_hide_repeats_but_every_sync_counts(captured):
    col, events, w, st = captured
    with warnings.catch_warnings():
        warnings.simplefilter("default")
        w.keep_first()
        for _ in range(100):
            c_level_op()
    col.flush(0, False)
    assert events[0].sites[0][5] == 100


def test_a_users_own_debug_mode_is_left_alone():
    t = fake_torch(mode=2)
    assert sync_cuda.attach(t, Collector(list().append, lambda: 1), FakeState()) is None
    assert t.box["mode"] == 2
    assert warnings._showwarnmsg.__module__ == "warnings"


def test_cpu_builds_are_not_touched():
    assert sync_cuda.attach(torch, Collector(list().append, lambda: 1), FakeState()) is None
    assert torch.version.cuda is None or sys.platform  # this suite runs on a CPU build
