"""A CUDA training loop for tests/gpu: per-step timings of its own from CUDA events, sync
sites marked SITE, and optional shapes (a CUDA graph, torch.compile, warning filters).

Prints one JSON line (``RESULT {...}``) with what the job measured about itself.
"""

import argparse
import json
import statistics
import sys
import warnings

import torch

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=60)
p.add_argument("--graph", action="store_true")
p.add_argument("--compile", action="store_true")
p.add_argument("--error-filter-after", action="store_true")
p.add_argument("--no-syncs", action="store_true")
a = p.parse_args()
if a.error_filter_after:
    warnings.filterwarnings("error")  # after `import torch`: a plain run raises nothing

dev = torch.device("cuda")
torch.manual_seed(0)
model = torch.nn.Sequential(
    torch.nn.Linear(512, 2048), torch.nn.ReLU(), torch.nn.Linear(2048, 512)
).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
x = torch.randn(256, 512, device=dev)
y = torch.randn(256, 512, device=dev)
fwd = torch.compile(model) if a.compile else model

if a.graph:  # capture once, replay every step (the documented whole-network recipe)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            opt.zero_grad(set_to_none=True)
            torch.nn.functional.mse_loss(model(x), y).backward()
            opt.step()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    opt.zero_grad(set_to_none=True)
    with torch.cuda.graph(g):
        static_loss = torch.nn.functional.mse_loss(model(x), y)
        static_loss.backward()
        opt.step()

times = []
for _ in range(a.steps):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    if a.graph:
        g.replay()
        loss = static_loss
        perftop_step = getattr(sys.modules.get("perftop"), "step", None)
        if perftop_step is not None:
            perftop_step()
    else:
        out = fwd(x)
        loss = torch.nn.functional.mse_loss(out, y)
        if not a.no_syncs:
            n = torch.nonzero(out > 3.0).shape[0]  # SITE nonzero
            sel = out[out > 2.0]  # SITE mask
            loss = loss + 0.0 * sel.sum() + 0.0 * n
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    end.record()
    if not a.no_syncs and not a.graph:
        loss.item()  # SITE item
    times.append((start, end))
torch.cuda.synchronize()
ms = [s.elapsed_time(e) / 1000.0 for s, e in times[5:]]
counters = {}
if a.compile:
    from torch._dynamo.utils import counters as c

    counters = {
        "unique_graphs": int(c["stats"]["unique_graphs"]),
        "graph_break": int(sum(c["graph_break"].values())),
    }
print("RESULT " + json.dumps({"gpu_p50_s": statistics.median(ms), "steps": a.steps, **counters}))
