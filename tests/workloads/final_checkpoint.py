"""Training steps, then a last checkpoint at the end of the run, as Lightning Fabric and
LitGPT write one: ``torch.save`` into memory, the file written (2 MiB), and the
checkpoint's own code after it (its config files: LitGPT's ``save_hyperparameters``), CPU
work; then the exit. Prints its own figures as JSON: the
steps and the checkpoint's time by its own timer, and how long it waited for a core in it.
argv: the one core to run on (default: any), and how many other users' busy processes to
start on it before the last steps (default 0): each in a session of its own (its own
autogroup, at the job's priority), killed after the checkpoint's code. Started here and not
by the test, the core is shared only for the steps and checkpoint that need it, not for
the job's start (torch's import at a third of a core: ~30 s of the suite's two cores)."""

import io
import json
import os
import subprocess
import sys
import time

if len(sys.argv) > 1:
    os.sched_setaffinity(0, {int(sys.argv[1])})

import torch
from core_wait import run_delay

torch.manual_seed(0)
torch.set_num_threads(1)
model = torch.nn.Linear(512, 1024)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(32, 512), torch.randn(32, 1024)
own = {"steps": 0}
RIVALS = int(sys.argv[2]) if len(sys.argv) > 2 else 0
SPIN = (
    "import os, time\nos.setsid()\nend = time.monotonic() + 60\nwhile time.monotonic() < end: pass"
)
rivals = []
for i in range(20):
    if i == 17:  # three steps before the end: running by the checkpoint (children share its core)
        rivals = [subprocess.Popen([sys.executable, "-S", "-c", SPIN], stdin=subprocess.DEVNULL)
                  for _ in range(RIVALS)]  # fmt: skip
    opt.zero_grad()
    torch.nn.functional.mse_loss(model(x), y).backward()
    opt.step()
    own["steps"] += 1
q, t = run_delay(), time.perf_counter()
buf = io.BytesIO()
torch.save(model.state_dict(), buf)
with open(os.path.join(os.getcwd(), "last.pt"), "wb") as f:
    f.write(buf.getvalue())
config = {f"key{i}": list(range(50)) for i in range(200)}
c = time.thread_time()
while time.thread_time() - c < 0.2:  # its own code: 0.2 s on the CPU
    json.dumps(config)
own["checkpoint_s"] = time.perf_counter() - t
own["checkpoint_wait_s"] = run_delay() - q
for r in rivals:
    r.kill()
    r.wait()
print(json.dumps(own), flush=True)
