"""The hook runs inside the user's training: it must stay light and harmless."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from perftop.monitor.jobenv import BOOTSTRAP_DIR, hook_env

FORBIDDEN = ["textual", "rich", "psutil", "pynvml", "numpy", "torch"]


def _run(code: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60
    )


def test_hook_imports_only_the_standard_library(tmp_path):
    code = (
        "import sys, json\n"
        "import perftop, perftop.hook as h\n"
        f"h.install({str(tmp_path / 'none.sock')!r})\n"
        "perftop.step()\n"
        "with perftop.phase('x'): pass\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in "
        f"{FORBIDDEN!r})))\n"
    )
    r = _run(code)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == []  # not even torch: it is patched only once the job imports it


def test_bootstrap_is_silent_and_unarmed_without_a_monitor(tmp_path):
    """PERFTOP_SOCKET points nowhere (a leaked variable): the job runs, prints nothing
    extra, exits 0 promptly (no multi-second hang on a dead socket at exit), and the hook
    armed nothing: torch unpatched, no sender thread."""
    env = hook_env(tmp_path / "nobody-listens.sock")
    code = (
        "import threading, torch\n"
        "bwd = torch.autograd.backward\n"
        "m = torch.nn.Linear(2, 1); o = torch.optim.SGD(m.parameters(), lr=0.1)\n"
        "for _ in range(50):\n"
        "    o.zero_grad(); m(torch.randn(4, 2)).sum().backward(); o.step()\n"
        "import perftop.hook as h; st = h.state()\n"
        "from torch.optim import optimizer as om\n"
        "print(st is not None, st.torch_patched, len(om._global_optimizer_pre_hooks),\n"
        "      type(type(o).step).__name__,\n"
        "      bwd.__module__, st.tracker.index, st.sender.started,\n"
        "      [t.name for t in threading.enumerate() if t.name.startswith('perftop')])\n"
    )
    t0 = time.perf_counter()
    r = _run(code, env)
    assert r.returncode == 0 and r.stderr == ""
    assert r.stdout.strip() == "True False 0 function torch.autograd 0 False []"
    assert time.perf_counter() - t0 < 30


def test_users_own_sitecustomize_still_runs(tmp_path):
    (tmp_path / "sitecustomize.py").write_text("import os; os.environ['USER_SITE_RAN'] = '1'\n")
    (tmp_path / "torch.py").write_text("")  # the hook loads once torch is imported
    env = hook_env(tmp_path / "x.sock")
    env["PYTHONPATH"] = env["PYTHONPATH"] + ":" + str(tmp_path)
    r = _run(
        "import os, torch, perftop.hook as h; print(os.environ.get('USER_SITE_RAN'), "
        "h.state() is not None)",
        env,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["1", "True"]
    assert str(BOOTSTRAP_DIR) in env["PYTHONPATH"].split(":")[0]


def test_hook_loads_by_path_in_an_interpreter_without_perftop(tmp_path):
    """A job may run another Python than perftop's (a conda env, a system python): the
    stdlib-only hook is loaded from perftop's folder without its site-packages."""
    base = getattr(sys, "_base_executable", sys.executable)
    env = hook_env(tmp_path / "x.sock", base={"PATH": "/usr/bin:/bin"})
    env["PYTHONPATH"] = str(BOOTSTRAP_DIR)  # only the bootstrap, not this checkout
    probe = subprocess.run(
        [base, "-c", "import perftop"], capture_output=True, cwd=tmp_path, env={"PATH": "/usr/bin"}
    )
    if probe.returncode == 0:
        pytest.skip("perftop is installed in the base interpreter too")
    (tmp_path / "torch.py").write_text("")  # the hook loads once torch is imported
    r = subprocess.run(
        [
            base,
            "-c",
            "import sys, torch, perftop, perftop.hook as h; "
            "print(h.state() is not None, 'textual' in sys.modules, perftop.__file__)",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr
    installed, textual, path = r.stdout.split()
    assert installed == "True" and textual == "False"
    assert path == str(BOOTSTRAP_DIR.parent / "__init__.py")
