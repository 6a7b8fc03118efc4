"""The hook's bootstrap on real jobs: import orders that look torch up before importing it,
an environment's own sitecustomize that extends sys.path, and a shutdown that never waits
on a monitor that stopped answering."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from perftop.hook import frames
from perftop.monitor.jobenv import BOOTSTRAP_DIR, hook_env
from tests.helpers import perftop

ROOT = Path(__file__).resolve().parent.parent

LOOP = """
import os, torch
m = torch.nn.Linear(4, 1); opt = torch.optim.SGD(m.parameters(), lr=0.1)
n = 0
for _ in range({steps}):
    loss = m(torch.randn(8, 4)).pow(2).mean(); opt.zero_grad(); loss.backward(); opt.step()
    n += 1
print("JOB", os.getpid(), n, flush=True)
"""

# transformers asks importlib for torch (find_spec) before it imports it
HF_FIRST = "from transformers import AutoConfig  # noqa\n"
# bare look-ups, after which the hook must still be unarmed, then a library imports torch
VIA_LIB = (
    "import importlib.util, sys\n"
    "assert importlib.util.find_spec('torch') is not None\n"
    "assert importlib.util.find_spec('torch') is not None\n"
    "hook = sys.modules.get('perftop.hook')  # loads only with torch\n"
    "print('ARMED_BEFORE', 'torch' in sys.modules, hook is not None, flush=True)\n"
    "import appmod, trainlib\n"
    "assert appmod.VALUE == 7 and trainlib.HAVE_TORCH\n"
    "trainlib.fit(120)\n"
)
# A library that looks torch up, then imports it, from a directory that only the
# environment's own sitecustomize puts on sys.path (site.addsitedir).
LIBRARY = (
    "import importlib.util\n"
    "HAVE_TORCH = importlib.util.find_spec('torch') is not None\n"
    "import torch\n"
    "def fit(steps):\n"
    "    exec(compile(LOOP.format(steps=steps), __file__, 'exec'), {})\n"
)
USER_SITE = (
    "import os, site, sys\n"
    "here = os.path.dirname(os.path.abspath(__file__))\n"
    "site.addsitedir(os.path.join(here, 'addsitedir'))\n"
    "sys.path.append(os.path.join(here, 'appended'))\n"
)


def _write_env(tmp_path: Path) -> Path:
    env_site = tmp_path / "env_site"
    (env_site / "addsitedir" / "trainlib").mkdir(parents=True)
    (env_site / "appended").mkdir()
    (env_site / "sitecustomize.py").write_text(USER_SITE)
    lib = env_site / "addsitedir" / "trainlib" / "__init__.py"
    lib.write_text(f"LOOP = {LOOP!r}\n" + LIBRARY)
    (env_site / "appended" / "appmod.py").write_text("VALUE = 7\n")
    (tmp_path / "hf_first.py").write_text(HF_FIRST + LOOP.format(steps=120))
    (tmp_path / "via_lib.py").write_text(VIA_LIB)
    return env_site


# Python processes of the job that cannot get the hook, each for its own reason.
# Each lives 5 s: long enough for the probes to see it on a loaded machine.
HOOKLESS = {
    "-I (isolated mode)": f"{sys.executable} -I -c 'import time; time.sleep(5)'",
    # a broken perftop earlier on the path than perftop's own: the bootstrap fails
    "bootstrap failed": 'PYTHONPATH="${PYTHONPATH%%:*}:$PWD/shadow" '
    f"{sys.executable} -c 'import torch, time; time.sleep(5)'",
    # the command sets PYTHONPATH rather than adding to it (a launch script's export)
    "has PYTHONPATH=/nowhere, without perftop's entry": "PYTHONPATH=/nowhere "
    f"{sys.executable} -c 'import torch, time; time.sleep(5)'",
    # started in a clean environment, perftop's bootstrap kept on its path
    "has no PERFTOP_SOCKET": 'env -i PYTHONPATH="${PYTHONPATH%%:*}" '
    f"{sys.executable} -c 'import torch, time; time.sleep(5)'",
}
OLD_PYTHON = Path(os.environ.get("PYENV_ROOT", "/root/.pyenv")) / "versions/3.9.18/bin/python3.9"
if OLD_PYTHON.exists():  # where the machine has one (the check itself runs on any Python)
    HOOKLESS["Python 3.9"] = f"{OLD_PYTHON} -c 'import time; time.sleep(5)'"


def test_import_orders_a_chained_sitecustomize_and_hookless_processes(tmp_path, monkeypatch):
    """One `perftop run`: transformers imported first (then bare find_spec look-ups), and
    torch imported from inside a library that the environment's own sitecustomize made
    importable: each one's step count is the job's own. Beside them, processes that cannot
    get the hook are each noted once, with why; the hooked ones never are."""
    env_site = _write_env(tmp_path)
    (tmp_path / "shadow" / "perftop").mkdir(parents=True)
    (tmp_path / "shadow" / "perftop" / "__init__.py").write_text("raise RuntimeError('broken')")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), str(env_site)]))
    py = sys.executable
    side = " & ".join(HOOKLESS.values())
    script = f"{side} & {py} hf_first.py && {py} via_lib.py; wait"
    rec = tmp_path / "r.perftop"
    run = perftop("run", "--headless", "--record", str(rec), "--", "sh", "-c", script,
                  cwd=tmp_path, timeout=180)  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    own = {int(pid): int(n) for _, pid, n in
           (ln.split() for ln in run.stdout.splitlines() if ln.startswith("JOB "))}  # fmt: skip
    assert len(own) == 2 and set(own.values()) == {120}
    assert "ARMED_BEFORE False False" in run.stdout  # a look-up is not an import
    rep = json.loads(perftop("report", "--json", str(rec), cwd=tmp_path).stdout)
    seen = {r["pid"]: r["steps"] for r in rep["ranks"]}
    assert seen == own
    notes = [n["text"] for n in rep["notes"] if n["source"] == "hook"]
    assert len(notes) == len(HOOKLESS), notes
    for why in HOOKLESS:
        assert sum(why in n for n in notes) == 1, (why, notes)
    assert not any(f"pid {pid} " in n for n in notes for pid in own)
    # the end's summary names them too (three, then how many more)
    said = [ln for ln in run.stderr.splitlines() if ln.startswith("perftop: warning: pid ")]
    assert len(said) == min(3, len(HOOKLESS)), run.stderr[-3000:]
    assert len(HOOKLESS) <= 3 or f"perftop: {len(HOOKLESS) - 3} more warnings" in run.stderr


def test_a_failed_by_path_load_leaves_no_half_built_module(tmp_path):
    """``import perftop.hook`` fails (a module of the job's own named perftop), so the hook
    is loaded by path once torch is imported (here the job's own stand-in), and that load
    fails too: the job's ``sys.modules`` is as it was."""
    pkg = tmp_path / "pkg"
    shutil.copytree(BOOTSTRAP_DIR, pkg / "_bootstrap")
    (pkg / "hook").mkdir()
    shutil.copy(BOOTSTRAP_DIR.parent / "hook" / "importwatch.py", pkg / "hook")
    (pkg / "__init__.py").write_text("STEP = 1\nraise RuntimeError('half-built')\n")
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "perftop.py").write_text("MINE = True\n")
    (tmp_path / "mine" / "torch.py").write_text("")
    env = {"PATH": "/usr/bin:/bin", "PERFTOP_SOCKET": str(tmp_path / "x.sock"),
           "PYTHONPATH": os.pathsep.join([str(pkg / "_bootstrap"), str(tmp_path / "mine")])}  # fmt: skip
    code = "import sys, torch; m = sys.modules.get('perftop'); print(getattr(m, 'MINE', m))"
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=60, cwd=tmp_path)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "True"


def test_generated_code_is_never_a_user_site():
    """torch.compile's generated files (under /tmp/torchinductor_<user>) are internal."""
    frames.configure()
    tmp = tempfile.gettempdir()
    assert frames.kind_of_path(f"{tmp}/torchinductor_me/ab/cab.py") == frames.INTERNAL
    assert frames.kind_of_path(f"{tmp}/work/train.py") == frames.USER


MONITOR = """
import sys
from perftop.monitor.server import Server
srv = Server(lambda frame, events: None, sys.argv[1]).start()
print("ready", flush=True)
sys.stdin.read()
"""

EXIT_JOB = """
import sys, time, perftop
print("ready", flush=True)
assert sys.stdin.readline().strip() == "go"  # the monitor is stopped now
end = time.perf_counter() + 0.5
while time.perf_counter() < end:  # far more than the socket's buffer holds: the sender
    for _ in range(1000):  # thread sits in a blocking send when the job exits
        perftop.step()
print("DONE", time.time(), flush=True)
"""

EPOCH_JOB = """
import sys, time, torch, perftop
from torch.utils.data import DataLoader, TensorDataset
print("ready", flush=True)
assert sys.stdin.readline().strip() == "go"
for _ in range(60000):
    perftop.step()
loader = DataLoader(TensorDataset(torch.randn(64, 4)), batch_size=16, num_workers=2)
ends = []
for epoch in range(2):
    for _ in loader:
        last = time.perf_counter()
    ends.append(time.perf_counter() - last)  # the workers' exits, their finalizers included
print("DONE", max(ends), flush=True)
"""


def _run_job(code: str, env: dict[str, str], stop: subprocess.Popen[str] | None) -> float:
    """The job's DONE figure, and for EXIT_JOB how long after it the process was gone."""
    job = subprocess.Popen([sys.executable, "-c", code], env=env, text=True,
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE)  # fmt: skip
    assert job.stdin is not None and job.stdout is not None
    assert job.stdout.readline().strip() == "ready"
    if stop is not None:
        os.kill(stop.pid, signal.SIGSTOP)
    job.stdin.write("go\n")
    job.stdin.flush()
    done = float(job.stdout.readline().split()[1])
    job.wait(timeout=60)
    return time.time() - done if code is EXIT_JOB else done


def test_shutdown_never_waits_on_a_stopped_monitor(tmp_path):
    """The monitor is SIGSTOPped mid-run with the hook's socket full and its sender thread
    blocked in a send: the job exits as fast as a plain run does (the exit flush has
    100 ms), and DataLoader workers' exits (their finalizers flush too) stay quick."""
    sock = tmp_path / "m.sock"
    mon = subprocess.Popen([sys.executable, "-c", MONITOR, str(sock)], text=True,
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE)  # fmt: skip
    try:
        assert mon.stdout is not None and mon.stdout.readline().strip() == "ready"
        plain = _run_job(EXIT_JOB, dict(os.environ), None)
        hooked = _run_job(EXIT_JOB, hook_env(sock), mon)
        os.kill(mon.pid, signal.SIGCONT)
        epoch_end = _run_job(EPOCH_JOB, hook_env(sock), mon)
    finally:
        os.kill(mon.pid, signal.SIGCONT)
        mon.kill()
        mon.wait()
    assert hooked < plain + 0.4, (plain, hooked)  # it waited 0.7 to 3 s before
    assert epoch_end < 1.0, epoch_end
