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
import threading
import time
import types
import warnings

import pytest
import torch

from perftop.hook import frames, sync_cuda, sync_detect
from perftop.hook.sync import Collector
from tests import site_lib

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


def line_of(text: str) -> int:
    """The number of the line of this file that reads ``text``."""
    with open(__file__) as fh:
        return fh.read().splitlines().index(text) + 1


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
    class Untouchable:
        def __getattr__(self, name: str):
            raise AssertionError(f"a CPU build's torch._C.{name} was touched")

    cpu_torch = types.SimpleNamespace(
        version=types.SimpleNamespace(cuda=None, hip=None), _C=Untouchable()
    )
    filters, show = list(warnings.filters), warnings._showwarnmsg
    st = FakeState()
    assert sync_cuda.attach(cpu_torch, Collector(list().append, lambda: 1), st) is None
    assert warnings.filters == filters and warnings._showwarnmsg is show and st.undo == []
    if torch.version.cuda is None and torch.version.hip is None:  # this suite's CPU torch
        assert sync_cuda.attach(torch, Collector(list().append, lambda: 1), st) is None
        assert warnings.filters == filters and warnings._showwarnmsg is show


# -- library code: the user's line leads, the library's line is the detail -------------


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    yield from site_lib.installed(tmp_path_factory.mktemp("env"))


def test_a_sync_in_a_library_is_the_users_line_with_the_library_line(captured, lib):
    col, events, w, st = captured
    for _ in range(3):
        lib.fit(c_level_op)  # user line into the library
    col.flush(0, False)
    (site,) = events[0].sites
    user_line = line_of("        lib.fit(c_level_op)  # user line into the library")
    assert site[:6] == (
        "op",  # named from the library's own line, "op(*args)"
        __file__,
        user_line,
        "test_a_sync_in_a_library_is_the_users_line_with_the_library_line",
        "sync",
        3,
    )
    assert site[6] is None  # the debug mode warns before the sync: it cannot time it
    assert site[7:] == (lib.__file__, site_lib.LINE, "inner", "fakelib")


def test_a_library_sync_with_no_user_frame_names_the_package(captured, lib):
    col, events, w, st = captured
    t = threading.Thread(target=lib.fit, args=(c_level_op,))  # stdlib, then library
    t.start()
    t.join()
    col.flush(0, False)
    (site,) = events[0].sites
    assert site[1:3] == (lib.__file__, site_lib.LINE) and site[7:] == (None, None, None, "fakelib")


# -- the time blocked, measured by the sampled detector on an accelerator's tensors -------


class FakeGpu:
    """A GPU's queue as the host sees it: kernels return at once and queue up; reading a
    result back (``.item()``, a copy to the CPU) blocks the host until the queue drains."""

    busy_until = 0.0

    @classmethod
    def launch(cls, seconds: float) -> None:
        cls.busy_until = max(cls.busy_until, time.perf_counter()) + seconds

    @classmethod
    def drain(cls) -> None:
        left = cls.busy_until - time.perf_counter()
        if left > 0:
            time.sleep(left)


class CudaTensor(torch.Tensor):
    """A tensor whose ``device`` is ``cuda`` (metadata only, on this CPU build); its ops
    run on a CPU tensor inside while the fake queue plays the GPU's timing."""

    @staticmethod
    def __new__(cls, inner: torch.Tensor):
        t = torch.Tensor._make_wrapper_subclass(cls, inner.shape, dtype=inner.dtype, device="cuda")
        t.inner = inner
        return t

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        unwrap = [a.inner if isinstance(a, CudaTensor) else a for a in args]
        name = func.overloadpacket.__name__
        if name == "_local_scalar_dense" or (name == "_to_copy" and kwargs.get("device")):
            FakeGpu.drain()  # device to host: wait for the queue
            kwargs = {k: v for k, v in kwargs.items() if k != "device"}
            return func(*unwrap, **kwargs)
        FakeGpu.launch(0.02)  # a kernel: 20 ms of GPU work, returns at once
        out = func(*unwrap, **kwargs)
        return CudaTensor(out) if isinstance(out, torch.Tensor) else out


@pytest.fixture
def detector():
    frames.configure()
    col = Collector(list().append, lambda: 1)
    st = FakeState()
    d = sync_detect.make_detector(torch, col, st)
    yield d, col
    d.stop()
    assert st.errors == []


def test_the_wait_inside_a_device_sync_is_measured(detector):
    d, col = detector
    x = CudaTensor(torch.randn(64))
    assert x.device.type == "cuda"
    (x * 2).sum().item()  # warm up the subclass's dispatch
    d.start()
    y = x * 2  # queued: returns at once
    queued = FakeGpu.busy_until - time.perf_counter()
    y.sum().item()  # device line: waits for both kernels
    z = torch.randn(4)
    z.sum().item()  # cpu line: nothing to wait for, nothing measured
    d.stop()
    got = {w[1]: blocked for (op, kind, w), blocked in col.blocked.items()}
    dev = line_of("    y.sum().item()  # device line: waits for both kernels")
    cpu = line_of("    z.sum().item()  # cpu line: nothing to wait for, nothing measured")
    assert queued > 0 and set(got) == {dev}
    assert queued <= got[dev] < queued + 2.0  # the queue draining, as the host waited
    assert {w[1] for (op, kind, w) in col.counts} == {dev, cpu}
    col.flush(1, True)


def test_device_to_host_copies_count_on_a_device_only(detector):
    d, col = detector
    x = CudaTensor(torch.randn(8))
    d.start()
    x.to("cpu")  # device to host: a sync
    torch.randn(8).to("cpu")  # already on the host: a no-op, not a sync
    torch.empty(8).copy_(torch.randn(8))  # host to host
    d.stop()
    ops = sorted((op, w[1]) for (op, kind, w) in col.counts)
    assert ops == [("cpu", line_of('    x.to("cpu")  # device to host: a sync'))]
