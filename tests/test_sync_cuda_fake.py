"""The CUDA path against a faithful fake (this machine has no GPU), behind torch's real
interface: ``torch.version.cuda``, ``torch.cuda.is_initialized()`` and
``torch._C._cuda_get/set_sync_debug_mode`` are patched in, and a tensor subclass whose
``device`` is ``cuda`` plays the GPU.

What torch does in debug mode ``warn`` (c10/cuda/CUDAFunctions.cpp,
torch/csrc/Exceptions.cpp): a syncing op issues a c10 warning; when the op was called from
Python, the warning becomes a Python ``UserWarning`` with the text below when the call
returns (an ``error`` filter turns it into an exception out of the op); in a C++ call with
no Python handler (a NCCL wait, autograd's threads) c10 prints it to stderr. Mode
``error`` raises. The first switch of the mode in a process warns once that the mode is a
prototype (``TORCH_WARN_ONCE`` in torch/csrc/cuda/Module.cpp), as a Python warning when the
switch returns, after the mode is set: seen on a real H100 with torch 2.11, where it reached
the job's stderr and, under ``-W error``, left the mode on. The fake does exactly that.
"""

from __future__ import annotations

import sys
import time
import types
import warnings

import pytest
import torch

from perftop.hook import frames, sync_cuda, sync_detect
from perftop.hook.sync_collector import Collector

TEXT = "called a synchronizing CUDA operation"
NOTICE = (
    "Synchronization debug mode is a prototype feature and does not yet detect all "
    "synchronizing operations"
)


class Driver:
    """The sync debug mode as torch's C++ keeps it, and the fake GPU's queue."""

    mode = 0
    busy_until = 0.0
    noticed = False  # TORCH_WARN_ONCE: once per process (per test here)

    @classmethod
    def set_mode(cls, mode: int) -> None:
        """``torch._C._cuda_set_sync_debug_mode``: the notice first time, after the set."""
        cls.mode = mode
        if not cls.noticed:
            cls.noticed = True
            warnings.warn(NOTICE, UserWarning, stacklevel=2)

    @classmethod
    def sync(cls, python: bool = True) -> None:
        """A synchronizing call: the host waits for the queue; then the debug mode."""
        left = cls.busy_until - time.perf_counter()
        if left > 0:
            time.sleep(left)
        if cls.mode == 2:
            raise RuntimeError(TEXT)
        if cls.mode == 1:
            if python:
                warnings.warn(TEXT, UserWarning, stacklevel=2)
            else:  # c10's own handler: no Python frame to warn in
                sys.stderr.write(f"Warning: {TEXT} (function warn_or_error_on_sync)\n")


class CudaTensor(torch.Tensor):
    """A tensor whose ``device`` is ``cuda`` (metadata only); its ops run on a CPU tensor
    inside; a kernel queues 20 ms of GPU work, a read back (item, a copy) syncs."""

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
            Driver.sync()
            kwargs = {k: v for k, v in kwargs.items() if k != "device"}
            return func(*unwrap, **kwargs)
        Driver.busy_until = max(Driver.busy_until, time.perf_counter()) + 0.02
        out = func(*unwrap, **kwargs)
        return CudaTensor(out) if isinstance(out, torch.Tensor) else out


class FakeSender:
    def __init__(self) -> None:
        self.notes: list[str] = []

    def note(self, level: str, text: str) -> None:
        self.notes.append(text)


class FakeState:
    def __init__(self) -> None:
        self.undo: list = []
        self.errors: list[str] = []
        self.sender = FakeSender()

    def internal_error(self, where: str) -> None:
        self.errors.append(where)


@pytest.fixture
def cuda(monkeypatch):
    """torch as a CUDA build with CUDA initialized, its debug mode the fake driver's."""
    Driver.mode = 0
    Driver.noticed = False
    monkeypatch.setattr(torch.version, "cuda", "12.4")
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch._C, "_cuda_get_sync_debug_mode", lambda: Driver.mode, raising=False)
    monkeypatch.setattr(torch._C, "_cuda_set_sync_debug_mode", Driver.set_mode, raising=False)
    frames.configure()
    st = FakeState()
    col = Collector(list().append, lambda: 1)
    real = sync_cuda.attach(torch, st)
    d = sync_detect.make_detector(torch, col, st, real)
    yield types.SimpleNamespace(d=d, col=col, st=st, real=real)
    d.stop()
    for fn in reversed(st.undo):
        fn()
    assert st.errors == []
    assert Driver.mode == 0


def line_of(text: str) -> int:
    with open(__file__) as fh:
        return fh.read().splitlines().index(text) + 1


def sites(col: Collector) -> dict[tuple[str, int, str], int]:
    return {(op, w[1], kind): n for (op, kind, w), n in col.counts.items()}


def test_real_syncs_counted_at_the_line_with_the_wait(cuda, capfd):
    x = CudaTensor(torch.randn(64))
    (x * 2).sum().item()  # warm up the subclass's dispatch
    cuda.d.start()
    y = x * 2  # queued: returns at once
    y.sum().item()  # item line
    y.sum().to("cpu")  # copy line
    cuda.d.stop()
    item = line_of("    y.sum().item()  # item line")
    cp = line_of('    y.sum().to("cpu")  # copy line')
    assert sites(cuda.col) == {("item", item, "sync"): 1, ("cpu", cp, "sync"): 1}
    blocked = {w[1]: b for _, (_, _, w), _, b in cuda.col.log}
    assert 0.01 < blocked[item] < 2.0  # the queue draining, as the host waited
    out = capfd.readouterr()
    assert TEXT not in out.err + out.out
    assert NOTICE not in out.err + out.out  # torch's notice at perftop's switch: not shown
    assert warnings.filters[0][0] != "always" or TEXT not in str(warnings.filters[0][1])


@pytest.mark.parametrize("when", ["before", "after", "inside catch_warnings"])
def test_error_filters_never_turn_a_sync_into_an_exception(cuda, when):
    """``-W error`` and pytest's filters are installed before perftop; a job's own
    ``filterwarnings("error")`` may come after; either way a plain run raises nothing."""
    x = CudaTensor(torch.randn(8))
    with warnings.catch_warnings():
        if when == "before":
            warnings.simplefilter("error")
        cuda.d.start()
        if when == "after":
            warnings.simplefilter("error")
        if when == "inside catch_warnings":
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                x.sum().item()
        x.sum().item()
        if when != "inside catch_warnings":
            with pytest.raises(UserWarning):  # the job's own warnings still raise
                warnings.warn("the job's own", UserWarning, stacklevel=1)
        cuda.d.stop()
    assert sum(cuda.col.counts.values()) == (2 if when == "inside catch_warnings" else 1)


def test_nothing_printed_and_no_mode_outside_the_sampled_calls(cuda, capfd):
    """A C++ sync with no Python frame (a NCCL wait under ``dist.barrier()``, work on
    autograd's threads) would print; the mode is never on for it."""

    class SyncsInBackward(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1

        @staticmethod
        def backward(ctx, g):
            Driver.sync(python=False)  # on autograd's C++ thread, on a GPU
            return g

    x = torch.randn(8, requires_grad=True)
    Driver.sync(python=False)  # between samples
    cuda.d.start()
    Driver.sync(python=False)  # in a sampled step, between torch calls
    SyncsInBackward.apply(x).sum().backward()  # backward runs with the mode off
    cuda.d.stop()
    Driver.sync(python=False)
    out = capfd.readouterr()
    assert out.err == "" and out.out == ""


def test_the_jobs_own_warnings_are_untouched(cuda):
    x = CudaTensor(torch.randn(8))
    cuda.d.start()
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        warnings.warn("user warning one", UserWarning, stacklevel=1)
        x.sum().item()
        warnings.warn("user deprecation", DeprecationWarning, stacklevel=1)
    cuda.d.stop()
    assert [str(m.message) for m in seen] == ["user warning one", "user deprecation"]
    assert sum(cuda.col.counts.values()) == 1


def test_a_jobs_own_debug_mode_is_theirs(cuda):
    """Set mid-run: perftop steps aside for good, says so, and the job sees its own
    warnings exactly as in a plain run (torch's default: once per line)."""
    x = CudaTensor(torch.randn(8))
    cuda.d.start()
    x.sum().item()
    Driver.mode = 1  # torch.cuda.set_sync_debug_mode("warn"), by the job
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        x.sum().item()
        x.sum().item()
    cuda.d.stop()
    assert len(seen) == 2 and all(TEXT in str(m.message) for m in seen)
    assert Driver.mode == 1  # left as the job set it
    assert cuda.real.aside and any("set CUDA's sync debug mode" in n for n in cuda.st.sender.notes)
    assert warnings._showwarnmsg.__module__ == "warnings"
    cuda.d.start()
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        x.sum().item()
    cuda.d.stop()
    assert len(seen) == 1  # still the job's, after perftop stepped aside
    Driver.mode = 0


def test_a_mode_set_before_perftop_is_left_alone(monkeypatch):
    Driver.mode = 2
    monkeypatch.setattr(torch.version, "cuda", "12.4")
    monkeypatch.setattr(torch._C, "_cuda_get_sync_debug_mode", lambda: Driver.mode, raising=False)
    monkeypatch.setattr(torch._C, "_cuda_set_sync_debug_mode", lambda m: None, raising=False)
    st = FakeState()
    real = sync_cuda.attach(torch, st)
    assert real is not None and real.aside and st.sender.notes
    assert Driver.mode == 2 and warnings._showwarnmsg.__module__ == "warnings"
    Driver.mode = 0


def test_cpu_builds_are_not_touched():
    class Untouchable:
        def __getattr__(self, name: str):
            raise AssertionError(f"a CPU build's torch._C.{name} was touched")

    cpu_torch = types.SimpleNamespace(
        version=types.SimpleNamespace(cuda=None, hip=None), _C=Untouchable()
    )
    filters, show = list(warnings.filters), warnings._showwarnmsg
    st = FakeState()
    assert sync_cuda.attach(cpu_torch, st) is None
    if torch.version.cuda is None and torch.version.hip is None:  # this suite's CPU torch
        assert sync_cuda.attach(torch, st) is None
    assert warnings.filters == filters and warnings._showwarnmsg is show and st.undo == []


def test_host_tensors_on_a_cuda_run_are_no_syncs(cuda):
    x = CudaTensor(torch.randn(8))
    cuda.d.start()
    torch.randn(8).sum().item()  # a host tensor: no sync, on any device
    x.to("cpu")  # device to host: a sync
    cuda.d.stop()
    assert sites(cuda.col) == {
        ("cpu", line_of('    x.to("cpu")  # device to host: a sync'), "sync"): 1
    }
