"""What on-demand op capture (issue 31) costs a job that never asks for one: nothing.

The tight CPU training step of ``e2e_overhead.py`` runs plainly, under this checkout's
``perftop run --headless --no-record``, and under the revision before op capture existed
(``43b6e92``, exported and built like e2e_overhead's release arm), interleaved; the same
paired medians. Then, once, the job under this checkout says what of the capture is in
it: perftop's capture modules must not be loaded and no profiler on (torch itself imports
``torch.profiler`` at import, so that module's presence says nothing).

    python benchmarks/capture_idle.py [--runs 9] [--steps 3000] [--before 43b6e92]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
BEFORE = "43b6e92"
CHECK = """
import sys, torch
x = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(x.parameters(), lr=0.1)
for _ in range(50):
    opt.zero_grad(); x(torch.randn(2, 4)).sum().backward(); opt.step()
mods = sorted(m for m in sys.modules if m.startswith("perftop.hook.capture"))
print("IDLE", mods, torch._C._autograd._profiler_enabled())
"""


def _e2e():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("e2e_overhead", HERE / "e2e_overhead.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def idle_check() -> str:
    with tempfile.TemporaryDirectory() as d:
        job = Path(d) / "check.py"
        job.write_text(CHECK)
        env = dict(os.environ, PYTHONPATH=str(HERE.parent))
        cmd = [sys.executable, "-m", "perftop", "run", "--headless", "--no-record", "--",
               sys.executable, str(job)]  # fmt: skip
        out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    line = next((ln for ln in out.stdout.splitlines() if ln.startswith("IDLE")), "")
    return line or f"no answer: {out.stderr[-300:]}"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=9)
    p.add_argument("--steps", type=int, default=3000)
    p.add_argument("--before", default=BEFORE, help="the revision before op capture")
    a = p.parse_args()
    e2e = _e2e()
    with tempfile.TemporaryDirectory() as d:
        before = e2e.export(a.before, Path(d))
        for name, root in {"this": HERE.parent, a.before: before}.items():
            print(f"{name:<8} hot path: {e2e.hot_path(root)}")
        print("\n".join(e2e.report(e2e.measure(a.runs, a.steps, {a.before: before}), a.runs)))
    print(f"this checkout, no capture asked: capture modules, profiler on: {idle_check()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
