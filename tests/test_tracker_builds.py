"""The two builds of steps.py (plain, and compiled by Cython) on the hooks torch really
calls, side by side in one training; which build runs, and how it falls back."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys

import pytest
import torch
import torch.optim.optimizer as optim_mod
import torch.utils.data.dataloader as dl
from torch.utils.data import DataLoader, TensorDataset

from perftop.hook import steps, steps_train
from perftop.monitor.jobenv import hook_env
from tests.conftest import _on_ci, compiled_steps_module
from tests.helpers import listening


def _hooked(cls: type, undo: list) -> tuple[object, list, list]:
    """A tracker of ``cls`` wired into torch as torch_patch does it."""
    out: list = []
    between: list = []
    tr = cls(out.append)
    tr.on_between = lambda kind, t0, length: between.append(kind)
    tr.on_iter = lambda it: it.loader_no  # _train numbers its iterators' loaders
    undo.append(optim_mod.register_optimizer_step_pre_hook(tr.opt_pre_hook).remove)
    undo.append(optim_mod.register_optimizer_step_post_hook(tr.opt_post_hook).remove)
    orig_b, orig_n = torch.autograd.backward, dl._BaseDataLoaderIter.__next__
    torch.autograd.backward = tr.wrap_backward(orig_b)
    dl._BaseDataLoaderIter.__next__ = tr.wrap_next(orig_n, torch.is_grad_enabled)
    undo.append(lambda: setattr(torch.autograd, "backward", orig_b))
    undo.append(lambda: setattr(dl._BaseDataLoaderIter, "__next__", orig_n))
    return tr, out, between


def _train() -> None:
    """Plain steps, an evaluation pass, closure steps (LBFGS), a GAN-like second optimizer."""
    torch.manual_seed(0)
    m = torch.nn.Linear(4, 1)
    train = DataLoader(TensorDataset(torch.randn(32, 4), torch.randn(32, 1)), batch_size=8)
    val = DataLoader(TensorDataset(torch.randn(16, 4)), batch_size=8)
    sgd, other = torch.optim.SGD(m.parameters(), lr=0.1), torch.optim.SGD(m.parameters(), lr=0)
    for epoch in range(2):
        it = iter(train)
        it.loader_no = 0
        for x, y in it:
            sgd.zero_grad()
            torch.nn.functional.mse_loss(m(x), y).backward()
            sgd.step()
            if epoch:
                other.step()
        with torch.no_grad():
            v = iter(val)
            v.loader_no = 1
            for (x,) in v:
                m(x)
    lbfgs = torch.optim.LBFGS(m.parameters(), max_iter=4)
    x, y = torch.randn(8, 4), torch.randn(8, 1)

    def closure():
        lbfgs.zero_grad()
        loss = torch.nn.functional.mse_loss(m(x), y)
        loss.backward()
        return loss

    for _ in range(3):
        lbfgs.step(closure)


def test_both_builds_see_the_same_steps_from_torch():
    fast = compiled_steps_module()
    undo: list = []
    try:
        plain, p_steps, p_between = _hooked(steps.StepTracker, undo)
        compiled, c_steps, c_between = _hooked(fast.StepTracker, undo)
        _train()
    finally:
        for fn in reversed(undo):
            fn()
    for tr in (plain, compiled):
        tr.flush()
    assert len(p_steps) == len(c_steps) == 11  # 8 plain steps, 3 LBFGS steps
    assert [(s[0], s[7]) for s in p_steps] == [(s[0], s[7]) for s in c_steps]
    assert p_between == c_between == ["eval", "eval"]
    for s in c_steps:  # the wrappers nest, so times differ slightly; the shape does not
        assert s[2] >= s[1] and s[3] + s[4] + s[5] <= s[2] - s[1] + 1e-6
    lbfgs = [s for s in c_steps if s[0] >= 8]
    assert all(s[4] > 0 for s in lbfgs)  # backward inside the closure is the step's


@pytest.mark.parametrize("pure", ["0", "1"])  # the compiled build, if built, and the plain one
def test_fork_resets_the_tracker_and_its_errors_never_reach_user_code(tmp_path, pure):
    """A forked child starts with no step; then the tracker is broken on purpose: training
    still runs and ends normally, the errors counted (one job for both: a job's start-up
    is most of what such a test costs)."""
    code = (
        "import os, torch, perftop.hook as h\n"
        "from perftop.hook import impl\n"
        "m = torch.nn.Linear(2, 1); o = torch.optim.SGD(m.parameters(), lr=0.1)\n"
        "for _ in range(5):\n"
        "    o.zero_grad(); m(torch.randn(4, 2)).sum().backward(); o.step()\n"
        "t = h.state().tracker\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    print('child', t.index, t.running, t.settled, t.primary, flush=True); os._exit(0)\n"
        "os.waitpid(pid, 0)\n"
        "print('parent', t.index, impl.compiled)\n"
        "t.fetch_loader = 5  # not a list: every backward and optimizer step trips on it\n"
        "for _ in range(3):\n"
        "    o.zero_grad(); m(torch.randn(4, 2)).sum().backward(); o.step()\n"
        "print('ok', sorted(h.state().errors))\n"
    )
    compiled_steps_module()
    env = dict(hook_env(tmp_path / "x.sock"), PERFTOP_PURE=pure)
    with listening(tmp_path / "x.sock"):  # the hook arms only when a monitor answers
        r = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
        )
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [
        "child 0 False False None",
        f"parent 5 {pure == '0'}",
        "ok ['backward', 'optimizer pre-hook']",  # (torch's global hook)
    ]


@pytest.mark.parametrize("pure", ["1", "0"])
def test_implementation_choice(pure, monkeypatch):
    compiled_steps_module()
    monkeypatch.setenv("PERFTOP_PURE", pure)
    code = "from perftop.hook import impl; print(impl.NAME)"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.stdout.strip().startswith("Python" if pure == "1" else "compiled")


def test_missing_extension_falls_back_silently():
    code = (
        "import sys; sys.modules['perftop.hook._steps_fast'] = None\n"  # import fails
        "import perftop.hook as h; from perftop.hook import impl, steps\n"
        "st = h.install('/nonexistent.sock')\n"
        "print(impl.NAME, type(st.tracker) is steps.StepTracker)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert (r.returncode, r.stderr, r.stdout.strip()) == (0, "", "Python (perftop.hook.steps) True")


@pytest.mark.parametrize("shape", steps_train.SHAPES, ids=lambda s: "-".join(map(str, s[:4])))
def test_the_build_profile_loops_close_one_step_each_in_both_builds(shape):
    """The loops the compiled build is profiled on (setup.py) run the hot path of a real
    job: every iteration of each shape closes one step, in the plain and compiled
    trackers alike (else the profile would train the wrong paths)."""
    loader, backwards, optimizer, explicit, _ = shape
    for mod in (steps, compiled_steps_module()):
        assert steps_train.run(mod, loader, backwards, optimizer, explicit, 1000) == 1000


def test_the_build_profile_runs_on_the_built_extension(tmp_path):
    """What setup.py runs between its two builds: the built file, loaded by path; a file
    that is no extension fails it (and setup.py then builds plainly)."""
    path = compiled_steps_module().__file__
    r = subprocess.run([sys.executable, "-m", "perftop.hook.steps_train", path, "3000"],
                       capture_output=True, text=True, timeout=120)  # fmt: skip
    assert r.returncode == 0, r.stderr
    junk = tmp_path / "_steps_fast.cpython-311-x86_64-linux-gnu.so"
    junk.write_bytes(b"not an ELF file")
    r = subprocess.run([sys.executable, "-m", "perftop.hook.steps_train", str(junk)],
                       capture_output=True, text=True, timeout=120)  # fmt: skip
    assert r.returncode != 0 and "ImportError" in r.stderr


def _producer(path: str) -> str:
    """The compiler and flags GCC recorded in the extension's debug info ("" if none)."""
    readelf = shutil.which("readelf")
    if readelf is None:
        return ""
    out = subprocess.run([readelf, "--debug-dump=info", path], capture_output=True, text=True,
                         timeout=120).stdout  # fmt: skip
    m = re.search(r"DW_AT_producer\s*:.*?(GNU C\S* .*)$", out, re.M)
    return m.group(1) if m else ""


def test_the_profiled_build_keeps_a_steps_path_in_one_piece():
    """With GCC, setup.py builds the tracker from its profile, each function whole: GCC
    12's hot/cold split took blocks of a step's own path for never run and put them in
    ``.cold`` parts, pages away (docs/benchmarks.md). On CI (GCC) the profile must be in."""
    path = compiled_steps_module().__file__
    producer = _producer(path)
    if "-fprofile-use" not in producer:
        assert not _on_ci(), f"CI's tracker was not built from its profile: {producer!r}"
        pytest.skip("not a profiled GCC build (another compiler, PERFTOP_PGO=0, no readelf)")
    assert "-fno-reorder-blocks-and-partition" in producer
    nm = subprocess.run(["nm", path], capture_output=True, text=True, timeout=120).stdout
    assert [ln.split()[-1] for ln in nm.splitlines() if ln.endswith(".cold")] == []
