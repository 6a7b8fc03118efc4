"""An MLP trained for a fixed number of steps, deterministic, for op-capture tests.

argv: MODE GATE. MODE ``plain`` (``cuda``: on the GPU) (``idle``: the same, and it says whether perftop's capture code was loaded); ``own_profiler`` (the whole loop inside the job's own
torch.profiler.profile); ``recompile`` (torch.compile, and dynamo reset every step: it
compiles again each step). Prints "ready" after step 5; from step 50 (7 when it recompiles) on it goes on
stepping with a learning rate of 0 (the weights stay as they are) until the file GATE
exists (at most 120 s; a test makes it once its capture is done); then prints the loss
and exits 7: the same output however many steps it waited. It writes to GATE.own, as JSON,
the time (``time.time()``) at which each of its ``opt.step()`` calls returned.
"""

import contextlib
import json
import os
import sys
import time

import torch

mode, gate = sys.argv[1], sys.argv[2]
torch.manual_seed(0)
torch.set_num_threads(1)
model = torch.nn.Sequential(
    torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 256), torch.nn.ReLU(),
    torch.nn.Linear(256, 10),
)  # fmt: skip
opt = torch.optim.SGD(model.parameters(), lr=0.01)
dev = "cuda" if mode == "cuda" else "cpu"  # cuda: the same on the GPU (tests/gpu)
model.to(dev)
x, y = torch.randn(64, 256, device=dev), torch.randint(0, 10, (64,), device=dev)
fwd = torch.compile(model, backend="eager") if mode == "recompile" else model
ctx = torch.profiler.profile() if mode == "own_profiler" else contextlib.nullcontext()
returned = []
with ctx:
    i = 0
    deadline = time.monotonic() + 120
    last = 12 if mode == "recompile" else 55  # a compile a step: few steps
    while i < last or (not os.path.exists(gate) and time.monotonic() < deadline):
        i += 1
        if mode == "recompile":
            torch._dynamo.reset()
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(fwd(x), y)
        loss.backward()
        opt.step()
        returned.append(time.time())
        time.sleep(0.005)
        if i == 5:
            print("ready", flush=True)
        if i == last - 5:
            for group in opt.param_groups:
                group["lr"] = 0.0
with open(gate + ".own", "w") as f:
    json.dump(returned, f)
print("final loss", repr(loss.item()), flush=True)
print("steps:", i, file=sys.stderr)  # stderr: how many steps depends on the gate
if mode == "idle":  # what a job nobody asked for a capture has loaded
    mods = sorted(m for m in sys.modules if m.startswith("perftop.hook.capture"))
    on = torch._C._autograd._profiler_enabled()
    print("capture modules:", mods, "profiler on:", on, file=sys.stderr)
sys.exit(7)
