"""The dispatch-level detector in-process: what counts, where, and what does not."""

from __future__ import annotations

import os
import sys

import pytest
import torch
from torch.overrides import TorchFunctionMode

from perftop.hook import frames, sync_detect
from perftop.hook.sync_collector import Collector
from tests import site_lib

HERE = __file__


class FakeState:
    def __init__(self) -> None:
        self.errors: list[str] = []

    def internal_error(self, where: str) -> None:
        self.errors.append(where)


@pytest.fixture
def det():
    frames.configure()
    col = Collector(lambda ev: None, lambda: 1)
    st = FakeState()
    d = sync_detect.make_detector(torch, col, st)
    d.start()
    try:
        yield d, col
    finally:
        d.stop()
        assert st.errors == []


def flat(col: Collector) -> dict[tuple, int]:
    """The collector's sites as (op, file, line, function, kind, lib_file, package)."""
    return {(op, w[0], w[1], w[2], kind, w[3], w[6]): n for (op, kind, w), n in col.counts.items()}


def ops(col: Collector) -> dict[str, int]:
    out: dict[str, int] = {}
    for (op, file, _line, _fn, _kind, _lib, _pkg), n in flat(col).items():
        assert file == HERE
        out[op] = out.get(op, 0) + n
    return out


DEV = "cpu"  # a job's device variable; on a GPU run it would say "cuda"


def test_each_sync_op(det):
    d, col = det
    x = torch.randn(16, device=DEV)  # made on the device
    m = x > 0
    x[m]
    x[torch.arange(3)]  # integer indexing: no sync
    torch.nonzero(x)
    x.nonzero()
    torch.unique(x)
    x.unique()
    x.sum().item()
    int(x[0]), float(x[0]), bool(x[0] > 0)
    x.tolist(), x.numpy()
    torch.masked_select(x, m)
    torch.repeat_interleave(x, torch.full((16,), 2))
    torch.repeat_interleave(x, torch.full((16,), 2), output_size=32)  # sized: no sync
    x.repeat_interleave(2)  # int repeats: no sync
    torch.where(m)
    torch.where(m, x, 0.0)  # three-argument where: no sync
    f"{x.sum():.2f}"
    h = x.cpu()  # on CPU ``h`` is ``x``: from here on its direct reads are the host's
    h.tolist(), h.numpy()
    d.stop()
    assert ops(col) == {
        "boolean_mask": 1,
        "nonzero": 2,
        "unique": 2,
        "item": 1,
        "int": 1,
        "float": 1,
        "bool": 1,
        "cpu": 1,
        "tolist": 1,
        "numpy": 1,
        "masked_select": 1,
        "repeat_interleave": 1,
        "where": 1,
        "format": 1,
    }
    assert {k[4] for k in flat(col)} == {"potential"}


def test_line_and_function_are_the_callers(det):
    d, col = det
    x = torch.randn(4, device=DEV)
    x.sum().item()
    line = _lineno() - 1
    d.stop()
    ((op, file, ln, fn, kind, lib, pkg),) = flat(col)
    assert lib is None and pkg is None
    assert (op, file, ln, fn) == ("item", HERE, line, "test_line_and_function_are_the_callers")


def _lineno() -> int:
    import sys

    return sys._getframe(1).f_lineno


def test_torch_internal_calls_are_not_sites(det):
    d, col = det
    p = torch.nn.Parameter(torch.randn(4))
    opt = torch.optim.Adam([p])
    p.sum().backward()
    opt.step()
    d.stop()
    assert col.counts == {}


def test_adam_really_calls_item_internally():
    """The control for the test above: Adam does call .item() (from torch's code)."""
    names: list[str] = []

    class Spy(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            names.append(getattr(func, "__name__", ""))
            return func(*args, **(kwargs or {}))

    p = torch.nn.Parameter(torch.randn(4))
    opt = torch.optim.Adam([p])
    p.sum().backward()
    with Spy():
        opt.step()
    assert "item" in names


def test_pageable_non_blocking_copy_is_a_real_sync(det):
    d, col = det
    d.not_devices = frozenset({"cpu"})  # let "meta" stand in for an accelerator here
    src = torch.randn(8)
    src.to("meta", non_blocking=True)
    src.to("meta")  # blocking copies are what the user asked for
    torch.empty(8, device="meta").copy_(src, non_blocking=True)
    d.stop()
    assert sorted((k[0], k[4], n) for k, n in flat(col).items()) == [
        ("pageable_copy", "sync", 1),
        ("pageable_copy", "sync", 1),
    ]


class UserMode(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


def test_stop_leaves_a_users_mode_in_place(det):
    d, col = det
    with UserMode() as um:
        d.stop()  # from under the user's mode: the user's stays on top
        assert not d.active
        assert torch._C._len_torch_function_stack() == 1
        assert torch._C._get_function_stack_at(0) is um
    assert torch._C._len_torch_function_stack() == 0


def test_a_users_mode_around_the_optimizer_step(det):
    """The detector starts and stops inside ``opt.step()`` (at step ends). A user's mode
    whose ``with`` block holds ``opt.step()`` pops itself on exit, never perftop's, and
    nothing is left behind step after step."""
    d, col = det
    d.stop()
    p = torch.nn.Parameter(torch.randn(4))
    opt = torch.optim.SGD([p], lr=0.1)
    opt.register_step_post_hook(lambda *a: d.stop() if d.active else d.start())
    for _ in range(6):
        with UserMode() as um:
            p.sum().backward()
            opt.step()
            assert torch._C._get_function_stack_at(torch._C._len_torch_function_stack() - 1) is um
        assert torch._C._len_torch_function_stack() == (1 if d.active else 0)
    d.stop()
    assert torch._C._len_torch_function_stack() == 0


def test_stop_from_another_thread_only_asks(det):
    import threading

    d, col = det
    x = torch.randn(4, device=DEV)
    t = threading.Thread(target=d.stop)
    t.start()
    t.join()
    assert not d.active and d.off  # not watching: calls pass straight through
    assert torch._C._len_torch_function_stack() == 1  # still on this thread's stack
    x.sum().item()
    assert col.counts == {}
    d.slot.check(0)  # a step end on the training thread: a safe point
    assert torch._C._len_torch_function_stack() == 0


def _flip_inside_backward(d, monkeypatch) -> list[int]:
    """Nine ``loss.backward()`` calls, each stopping (or starting) the detector from inside
    the mode's dispatch of ``Tensor.backward`` (as perftop's ``torch.autograd.backward``
    wrapper ends a step there); the stack's depth after each."""
    w = torch.nn.Parameter(torch.randn(4))
    orig_autograd = torch.autograd.backward
    flip = [True]

    def backward(*args, **kwargs):  # the step tracker's close, as perftop wraps it
        d.stop() if flip[0] else d.start()
        return orig_autograd(*args, **kwargs)

    monkeypatch.setattr(torch.autograd, "backward", backward)
    depths = []
    for _ in range(9):
        flip[0] = d.active
        (w * 2).sum().backward()  # stop (or start) from inside the dispatch
        depths.append(torch._C._len_torch_function_stack())
    return depths


def test_a_step_end_inside_the_modes_own_dispatch_leaves_no_mode(det, monkeypatch):
    """``loss.backward()`` dispatches ``Tensor.backward`` to the mode, popped meanwhile;
    perftop's ``torch.autograd.backward`` wrapper, called inside, ends the step there. The
    detector stopped (or started) there must not lose or double the mode, and the change
    is made at the first call after the dispatch (the depth's own read), not at the next
    module call: a manual update's loop makes none before its next forward."""
    d, col = det
    notes: list[str] = []
    d.slot.note = notes.append
    orig = torch.Tensor.backward
    depths = _flip_inside_backward(d, monkeypatch)
    assert depths == [0, 1] * 4 + [0], depths
    hooks = torch.nn.modules.module._global_forward_pre_hooks
    assert not d.active and torch.Tensor.backward is orig and len(hooks) == 0
    assert sys.getprofile() is None  # the profile function is gone with the wait
    d.slot.check(9)
    assert notes == []


def test_a_jobs_own_profile_function_is_kept_and_the_change_waits(det, monkeypatch):
    """Under the job's own profiler (``sys.setprofile``: cProfile's place), perftop sets
    none: the change waits for the next module call (a global forward pre-hook: torch's
    API), outside the dispatch, and the job's profile function sees every call."""
    d, col = det
    notes: list[str] = []
    d.slot.note = notes.append
    seen = []

    def users(frame, event, arg):
        seen.append(event)

    sys.setprofile(users)
    try:
        depths = _flip_inside_backward(d, monkeypatch)
        assert sys.getprofile() is users
    finally:
        sys.setprofile(None)
    assert depths == [1] * 9  # on, or waiting for a safe point: never 2
    hooks = torch.nn.modules.module._global_forward_pre_hooks
    assert not d.active and len(hooks) == 1 and seen
    w = torch.nn.Parameter(torch.randn(4))
    (w * 2).sum().backward()  # no module call yet: still waiting, never doubled
    assert torch._C._len_torch_function_stack() == 1
    torch.nn.Identity()(w)
    assert torch._C._len_torch_function_stack() == 0
    assert len(hooks) == 0  # the trap is gone with the wait
    d.slot.check(9)
    assert notes == []


def test_a_profile_function_the_job_sets_while_one_waits_is_kept(det, monkeypatch):
    """The job starts its own profiler while perftop's profile function waits (inside the
    dispatch): the job's stays; the change waits for the module call; perftop's is used
    again at the next wait once the job's is gone."""
    d, col = det
    w = torch.nn.Parameter(torch.randn(4))
    orig_autograd = torch.autograd.backward

    def users(frame, event, arg):
        pass

    def backward(*args, **kwargs):  # the step ends here; the job's profiler starts too
        d.stop()
        sys.setprofile(users)
        return orig_autograd(*args, **kwargs)

    monkeypatch.setattr(torch.autograd, "backward", backward)
    try:
        (w * 2).sum().backward()
        assert torch._C._len_torch_function_stack() == 1  # waiting for a module call
        torch.nn.Identity()(w)
        assert torch._C._len_torch_function_stack() == 0 and sys.getprofile() is users
    finally:
        sys.setprofile(None)
    assert not d.slot.calls
    monkeypatch.undo()
    depths = _flip_inside_backward(d, monkeypatch)
    assert depths[:2] == [1, 0], depths  # started, then stopped at the first call after


def test_a_doubled_mode_is_repaired_at_the_step_end_and_told(det):
    d, col = det
    notes: list[str] = []
    d.slot.note = notes.append
    torch._C._push_on_torch_function_stack(d)  # whatever did it: a second copy
    d.slot.check(5)
    assert torch._C._len_torch_function_stack() == 1
    (msg,) = notes
    assert "2 times" in msg and "step 5" in msg


def test_host_tensors_are_no_syncs(det):
    """The batch sampler of a well-known script: CPU index tensors from randint, arange
    and from_numpy with no device, indexing a numpy memmap or a list."""
    import numpy as np

    d, col = det
    data = np.arange(1000, dtype=np.uint16)
    ix = torch.randint(len(data) - 8, (4,))
    x = torch.stack([torch.from_numpy(data[i : i + 8].astype(np.int64)) for i in ix])
    order = list(range(10))
    [order[int(j)] for j in torch.arange(3)]
    torch.from_numpy(data[:4].astype(np.int64)).tolist()
    ix.max().item()
    x = x.to(DEV)  # its copy goes to the device (on CPU ``x`` itself: see below)
    (x * torch.ones(8, device=DEV)).sum().item()  # with device data: it counts
    line = _lineno() - 1
    d.stop()
    assert [(k[0], k[2]) for k in flat(col)] == [("item", line)]


def test_a_host_copy_made_by_cpu_is_host_data_and_a_sent_batch_device_data(det):
    """On CPU ``.cpu()`` returns its input itself: the host copy it stands for is read on
    the host, so ``.cpu()`` is the site and ``bool(h > 0)`` is not. ``.to(device)`` also
    returns its input, and what the loop trains on is what it sent: the batch is device
    data (``torch.unique(y)`` syncs on a GPU), its host reads reported on CPU."""
    d, col = det
    model = torch.nn.Linear(4, 2)
    batch = (torch.randn(8, 4), torch.randn(8, 2))
    x, y = (t.to(DEV) for t in batch)
    loss = (model(x) - y).pow(2).mean()
    loss.item()
    at_loss = _lineno() - 1
    torch.unique(y)  # a sent batch's: a GPU waits here
    at_unique = _lineno() - 1
    h = loss.detach().cpu()
    at_cpu = _lineno() - 1
    bool(h > 0), float(h), (h * 2).tolist(), h.item()
    d.stop()
    assert sorted((k[0], k[2]) for k in flat(col)) == [
        ("cpu", at_cpu),
        ("item", at_loss),
        ("unique", at_unique),
    ]


def test_what_touches_the_model_is_on_the_device(det):
    d, col = det
    model = torch.nn.Linear(4, 2)
    target = torch.randn(8, 2)  # made before the loop; meets the model's output below
    scale = torch.tensor(2.0)  # a 0-dim CPU scalar may stay on the host
    out = model(torch.randn(8, 4))
    loss = ((out - target) ** 2).mean() * scale
    loss.item()
    target.sum().item()
    scale.item()
    for w in model.weight:  # iterating a parameter: its rows are on the device
        w.sum().tolist()
    d.stop()
    assert ops(col) == {"item": 2, "tolist": 2}


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    yield from site_lib.installed(tmp_path_factory.mktemp("env"), "detlib")


def test_a_library_call_is_the_users_line_with_the_library_line(det, lib):
    d, col = det
    x = torch.randn(1, device=DEV)
    lib.fit(torch.Tensor.item, x)  # user line into the library
    line = _lineno() - 1
    x.to("cpu")  # a CPU run: a host-to-host no-op, not a potential sync
    d.stop()
    ((op, kind, w),) = col.counts
    assert (op, kind) == ("item", "potential")
    fn = "test_a_library_call_is_the_users_line_with_the_library_line"
    assert w == (HERE, line, fn, lib.__file__, site_lib.LINE, "inner", "detlib")


def test_a_batch_from_loader_workers_is_host_data(det):
    """A batch from a DataLoader worker is rebuilt on its shared memory by torch's own
    ``torch.empty(device=storage.device)``: no device the job named, so a transform that
    follows its device (torchvision's ``Normalize``) makes host tensors. A factory the
    job gives its device is device data."""
    from torch.utils.data import DataLoader, TensorDataset

    d, col = det
    data = TensorDataset(torch.randn(64, 4), torch.randn(64, 1))
    it = iter(DataLoader(data, batch_size=8, num_workers=1))
    for _ in range(3):
        xb, _yb = next(it)
        std = torch.as_tensor([0.5, 0.25], device=xb.device)
        assert not bool((std == 0).any())
    z = torch.zeros(2, device=DEV)
    z.sum().item()
    line = _lineno() - 1
    d.stop()
    assert [(k[0], k[2]) for k in flat(col)] == [("item", line)]


def test_a_commands_launcher_is_no_users_line(det, lib, tmp_path, monkeypatch):
    """``litgpt pretrain`` runs from the launcher pip writes for a package's command
    (``venv/bin/litgpt``: ``sys.exit(main())``, no ``.py``), all else a library's: every
    site read ``litgpt:8``. A launcher is no user's code: the site is the innermost user
    frame below it (here this test's own line), the library's line kept."""
    d, col = det
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    launcher = bin_dir / "mytool"
    launcher.write_text("lib.fit(torch.Tensor.item, x)\n")
    monkeypatch.setattr(frames, "_scripts", (str(bin_dir) + os.sep,))
    monkeypatch.setattr(frames, "_kinds", {})  # decisions cached under this setting: apart
    x = torch.randn(1, device=DEV)
    exec(compile(launcher.read_text(), str(launcher), "exec"), {"lib": lib, "torch": torch, "x": x})
    line = _lineno() - 1
    d.stop()
    ((op, kind, w),) = col.counts
    assert (op, kind) == ("item", "potential")
    fn = "test_a_commands_launcher_is_no_users_line"
    assert w == (HERE, line, fn, lib.__file__, site_lib.LINE, "inner", "detlib"), w
    assert frames.kind_of_path(str(bin_dir / "train.py")) == frames.USER  # a script there
