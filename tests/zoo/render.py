"""A spec (tests/zoo/parts.py) rendered to a small, readable training loop."""

from __future__ import annotations

from tests.zoo.parts import Spec, Sync

HEAD = """\
# a loop of the zoo: {spec}
import json, os, queue, random, threading, time
import torch
torch.set_num_threads(1)
torch.manual_seed({seed})
rng = random.Random({seed})
perf = time.perf_counter
device = torch.device("cpu")
D, B, N, STEPS = {width}, {batch}, 2048, {steps}
model = torch.nn.Sequential(
    torch.nn.Linear(D, D), torch.nn.ReLU(), torch.nn.Linear(D, D), torch.nn.ReLU(),
    torch.nn.Linear(D, 1),
).to(device)
params = list(model.parameters())
X_host, Y_host = torch.randn(N, D), torch.randn(N, 1)
XE = torch.randn(64, D).to(device)
own = {{"steps": 0, "calls": {{}}, "watchable": {{}}, "host_lines": [], "passes": [],
       "checkpoints": [], "data_wait_s": 0.0, "depth": [], "blocked": [],
       "depth_start": torch._C._len_torch_function_stack()}}
CKPT = os.environ.get("ZOO_OUT", "zoo.json") + ".pt"


def called(line, step, between=False):
    own["calls"][line] = own["calls"].get(line, 0) + 1
    if 1 <= step < STEPS and not between:
        own["watchable"][line] = own["watchable"].get(line, 0) + 1


try:  # this thread's time waiting for a core (run-queue delay), as Linux counts it
    SCHED = open("/proc/thread-self/schedstat", "rb", buffering=0)
except OSError:
    SCHED = None
def rq():
    if SCHED is None:
        return 0.0
    SCHED.seek(0)
    return int(SCHED.read().split()[1]) * 1e-9
GCS = [0.0, 0.0]  # seconds in garbage collections so far; the last one's start
def _gc(phase, info):  # a collection lands in whatever code allocated: the loop counts it
    if phase == "start":
        GCS[1] = perf()
    else:
        GCS[0] += perf() - GCS[1]
import gc
gc.callbacks.append(_gc)
MARK = []  # wall and CPU time when the last forward returned
def fwd(xb, yb):  # also times the thread's time off the CPU since the last one returned
    if MARK:
        own["blocked"].append(perf() - MARK[0] - (time.thread_time() - MARK[1]))
    loss = torch.nn.functional.mse_loss(net(xb), yb)
    MARK[:] = [perf(), time.thread_time()]
    return loss
"""

_LOADER = """\
from torch.utils.data import DataLoader, TensorDataset
loader = DataLoader(TensorDataset(X_host, Y_host), batch_size=B, shuffle=True, drop_last=True{workers})
def forever():
    while True:
        yield from loader
it = forever()
def fetch(i):
    return next(it)
"""
DATA = {
    "loader0": _LOADER.format(workers=""),
    "loader1": _LOADER.format(
        workers=",\n                    num_workers=1, persistent_workers=True"
    ),
    "slice": """\
def fetch(i):
    j = (i * B) % (N - B)
    return X_host[j:j + B], Y_host[j:j + B]
""",
    "preloaded": """\
X_dev, Y_dev = X_host.to(device), Y_host.to(device)  # a small data set kept on the device
def fetch(i):
    j = (i * B) % (N - B)
    return X_dev[j:j + B], Y_dev[j:j + B]
""",
}
# A feeder thread (a producer filling a queue) stops when the loop is over: one left in
# torch's code as the interpreter exits aborts the process ("terminate called without an
# active exception", plain runs too), so each offers its batch with a timeout, and an
# atexit handler stops and joins it.
_STOPPABLE = """\
import atexit
q, stop = queue.Queue(maxsize=4), threading.Event()
def offer(b):  # put, unless the loop is over (a feeder blocked in put could not stop)
    while not stop.is_set():
        try:
            q.put(b, timeout=0.05)
            return
        except queue.Full:
            pass
"""
_START = """\
feeder = threading.Thread(target=produce, daemon=True)
feeder.start()
atexit.register(lambda: (stop.set(), feeder.join(5)))
def fetch(i):
    return q.get()
"""
DATA["thread"] = (
    _STOPPABLE
    + """\
def produce():
    i = 0
    while not stop.is_set():
        j = (i * B) % (N - B)
        offer((X_host[j:j + B].clone(), Y_host[j:j + B].clone()))
        i += 1
"""
    + _START
)

# Issue 30 item 3's feeders, each fetched by ``fetch(i)`` on the training thread (which the
# loop times): ``FEED_S`` is a slicing feeder's own time a batch.
_PREFETCHER = """\
class Prefetcher:  # keeps the next batch ready, as the classic data_prefetcher does
    def __init__(self, make):
        self.make = make
        self.it = iter(make())
        self.ready = self.load()
    def load(self):
        try:
            return next(self.it)
        except StopIteration:
            self.it = iter(self.make())
            return next(self.it)
    def next(self):
        batch, self.ready = self.ready, self.load()
        return batch
"""
_SLICES = """\
def slices():
    for i in range(N // B):
        time.sleep(FEED_S)  # reading the next shard
        j = i * B
        yield X_host[j:j + B], Y_host[j:j + B]
"""
_LOADER_ONLY = _LOADER.split("def forever")[0]
DATA.update(
    {
        "thread_loader": _LOADER_ONLY.format(workers="")
        + _STOPPABLE
        + """\
def produce():  # a feeder thread iterates the DataLoader into a queue
    while not stop.is_set():
        for b in loader:
            offer(b)
            if stop.is_set():
                return
"""
        + _START,
        "generator": _SLICES
        + """\
def forever():
    while True:
        yield from slices()
gen = forever()
def fetch(i):
    return next(gen)
""",
        "prefetch_loader": _LOADER_ONLY.format(workers="")
        + _PREFETCHER
        + "pre = Prefetcher(lambda: loader)\ndef fetch(i):\n    return pre.next()\n",
        "prefetch_slice": _SLICES
        + _PREFETCHER
        + "pre = Prefetcher(slices)\ndef fetch(i):\n    return pre.next()\n",
    }
)
# the producer thread of slices, FEED_S a batch
DATA["thread_slow"] = (
    _STOPPABLE
    + """\
def produce():
    i = 0
    while not stop.is_set():
        time.sleep(FEED_S)
        j = (i * B) % (N - B)
        offer((X_host[j:j + B].clone(), Y_host[j:j + B].clone()))
        i += 1
"""
    + _START
)

UPDATE_SETUP = {
    "optim": "opt = torch.optim.SGD(params, lr=1e-3, momentum=0.9)",
    "manual": "LR = 1e-3",
    "lbfgs": "opt = torch.optim.LBFGS(params, lr=0.05, max_iter=2, history_size=4)",
    "grad": "LR = 1e-3",
    "two_optims": (
        "opt = torch.optim.SGD(params[:2], lr=1e-3)\nopt2 = torch.optim.Adam(params[2:], lr=1e-4)"
    ),
    "accum": "opt = torch.optim.AdamW(params, lr=1e-4)\nACC = 2",
}

# The update, indented for the loop body; ``loss`` is left bound to a device-bound value.
UPDATE = {
    "optim": """\
opt.zero_grad()
loss = fwd(xb, yb)
loss.backward()
{pre}opt.step()""",
    "manual": """\
loss = fwd(xb, yb)
model.zero_grad()
loss.backward()
{pre}with torch.no_grad():
    for p in params:
        p.add_(p.grad, alpha=-LR)""",
    "lbfgs": """\
def closure():  # the syncs before the update: in the closure (each evaluation of it)
    global metric
    opt.zero_grad()
    loss = fwd(xb, yb)
    loss.backward()
{pre}    return loss
loss = opt.step(closure)""",
    "grad": """\
loss = fwd(xb, yb)
grads = torch.autograd.grad(loss, params)
{pre}with torch.no_grad():
    for p, g in zip(params, grads):
        p.sub_(g, alpha=LR)""",
    "two_optims": """\
opt.zero_grad()
opt2.zero_grad()
loss = fwd(xb, yb)
loss.backward()
{pre}opt.step()
opt2.step()""",
    "accum": """\
opt.zero_grad()
for k in range(ACC):
    if k:
        xb, yb = batch(i)
    loss = fwd(xb, yb) / ACC
    loss.backward()
{pre}opt.step()""",
}

OPS = {
    "item": "_v = {x}.item()",
    "bool": "_v = bool({x} > 1e9)",
    "nonzero": "_v = torch.nonzero({x}.reshape(-1) > 0)",
    "format": '_v = f"{{{x}:.4f}}"',
}

TAIL = """\
own["wall_s"] = perf() - T0
own["depth_end"] = torch._C._len_torch_function_stack()
own["checksum"] = float(sum(p.detach().double().sum() for p in params))
with open(os.environ.get("ZOO_OUT", "zoo.json"), "w") as f:
    json.dump(own, f)
"""


class Source:
    """Lines with their numbers, so a sync line's key is the line the loop runs it on."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        # each sync line's period (-1: random; -4: the first 4 iterations)
        self.periods: dict[int, int] = {}

    def add(self, text: str, indent: int = 0) -> int:
        for ln in text.splitlines():
            self.lines.append(" " * indent + ln if ln else "")
        return len(self.lines)

    def __str__(self) -> str:
        return "\n".join(self.lines) + "\n"


def _sync(src: Source, s: Sync, indent: int, step: str, between: str = "") -> None:
    if s.period == 1:
        cond = "True"
    elif s.period < 0:
        cond = f"i < {-s.period}"
    elif s.period:
        cond = f"i % {s.period} == {s.phase % s.period}"
    else:
        cond = f"rng.random() < {s.chance}"
    # after the update: a metric made before it, in the step before (an unwatched one, often)
    x = "metric" if s.after else "loss.detach()" if s.op != "format" else "loss"
    if s.on_data:
        x = "xb[:, 0]" if s.op == "nonzero" else "xb[0, 0]"  # a scalar for the others
    line = len(src.lines) + 2
    src.periods[line] = s.period if s.period else -1
    tail = f", {between}" if between else ""
    src.add(f"if {cond}:\n    {OPS[s.op].format(x=x)}; called({line}, {step}{tail})", indent)


def render(spec: Spec) -> str:
    src = Source()
    src.add(HEAD.format(spec=spec.show(), **_fields(spec)))
    src.add("net = torch.compile(model)" if spec.compiled else "net = model")
    src.add(_data(spec))
    src.add(UPDATE_SETUP[spec.update])
    src.add("\n\ndef batch(i):")
    src.add("    q, c, g = rq(), time.thread_time(), GCS[0]  # rq() drops the GIL: before t")
    src.add("    t = perf()\n    xb, yb = fetch(i)")
    src.add('    own["data_wait_s"] += perf() - t')
    src.add("    # each fetch's own wait; its time blocked (less its CPU and its wait for a core);")
    src.add("    # its collections; its wait for a core")
    src.add("    w, c, q = perf() - t, time.thread_time() - c, rq() - q")
    src.add('    own.setdefault("waits", []).append([i, w, w - c - q, GCS[0] - g, q])')
    if spec.host_transform:  # torchvision's Normalize: a host tensor following xb's device
        src.add("    for s in range(4):")
        src.add("        std = torch.as_tensor([0.5, 0.25], device=xb.device)")
        n = src.add("        if bool((std == 0).any()):")
        src.add("            raise ValueError('std')")
        if spec.data != "preloaded":  # there xb is device data: the transform's bool() syncs
            src.add(f'    own["host_lines"] = [{n}]')
    if spec.data != "preloaded":
        src.add("    xb, yb = xb.to(device), yb.to(device)")
    src.add('    own.setdefault("batch_waits", []).append([i, perf() - t])  # and its transform')
    src.add("    return xb, yb\n\n")
    src.add("T0 = perf()\nfor i in range(STEPS):")
    src.add("xb, yb = batch(i)", 4)
    pre = [s for s in spec.syncs if not s.after]
    body = UPDATE[spec.update].split("{pre}")
    src.add(body[0], 4)
    inner = 8 if spec.update == "lbfgs" else 4
    src.add("metric = loss.detach()", inner)
    for s in pre:  # in this iteration's step, before the update closes it
        _sync(src, s, inner, "i")
    src.add(body[1], 4)
    src.add('own["steps"] += 1', 4)
    src.add("if i == 0:  # its one-time start (a worker spawned, lazy init) apart", 4)
    src.add('own["first_s"] = perf() - T0', 8)
    src.add('own["depth"].append(torch._C._len_torch_function_stack())', 4)
    _after_work(src, spec)
    # After the update: in the next step, a pass or a checkpoint after it in this iteration
    # or not (an interval between steps begins where its pass does, gaps.py).
    for s in spec.syncs:
        if s.after:
            _sync(src, s, 4, "i + 1")
    _between(src, spec)
    _slow_eval(src, spec)
    _final(src, spec)
    src.add(f'own["periods"] = {src.periods!r}')
    src.add(TAIL)
    return str(src)


def _data(spec: Spec) -> str:
    """The data part, with its feeder's own time a batch (``FEED_S``)."""
    slow = spec.data == "thread" and spec.feed_ms
    return f"FEED_S = {spec.feed_ms / 1000}\n" + DATA["thread_slow" if slow else spec.data]


def _fields(spec: Spec) -> dict[str, object]:
    return {k: getattr(spec, k) for k in ("seed", "width", "batch", "steps")}


def _between(src: Source, spec: Spec) -> None:
    """An evaluation, a sampling pass and a checkpoint after some steps, each timed."""
    if spec.evaluate:
        src.add(f"if i % {spec.evaluate} == {spec.evaluate - 1}:", 4)
        src.add(
            "q0, gc0 = rq(), GCS[0]\nt = perf()\nwith torch.no_grad():\n    for _ in range(3):", 8
        )
        src.add("        out = net(XE)", 8)
        n = src.add("    acc = (out > 0).float().mean().item()", 8)
        src.add(f'own["passes"].append([i, "eval", {n}, perf() - t, GCS[0] - gc0, rq() - q0])', 8)
    if spec.sample:
        src.add(f"if i % {spec.sample} == {spec.sample - 1}:", 4)
        src.add(
            "q0, gc0 = rq(), GCS[0]\nt = perf()\nwith torch.no_grad():\n    z = XE[:2]\n    for _ in range(4):",
            8,
        )
        n = src.add("        tok = int(net(z).argmax())", 8)
        src.add(f'own["passes"].append([i, "sample", {n}, perf() - t, GCS[0] - gc0, rq() - q0])', 8)
    if spec.checkpoint:
        # Timed as a user times a checkpoint, state_dict() included. perftop's checkpoint is
        # torch.save's own time (its signal); the state_dict() before it (microseconds for a
        # plain module) stays in the next step, as the loop's other code after the update
        # does: within accounting.PASS_SLACK_S here (a sharded model's would not be).
        src.add(f"if i % {spec.checkpoint} == {spec.checkpoint - 1}:", 4)
        src.add("q0, gc0 = rq(), GCS[0]\nt = perf()\ntorch.save(model.state_dict(), CKPT)", 8)
        src.add('own["checkpoints"].append([i, perf() - t, GCS[0] - gc0, rq() - q0])', 8)


def _after_work(src: Source, spec: Spec) -> None:
    """Host work after each update, before any pass (a log line formatted and written, on
    the CPU): its time is the loop's, not an evaluation's, a checkpoint's or data wait."""
    if spec.after_ms:
        src.add(f"t = perf()\nwhile perf() - t < {spec.after_ms / 1000}:", 4)
        src.add('    line = f"step {i} loss {t:.4f}"  # writing a log line', 4)


def _slow_eval(src: Source, spec: Spec) -> None:
    """One long evaluation mid-run (``slow_eval`` s of forward passes): time between
    steps, no stalled step."""
    if spec.slow_eval:
        src.add("if i == STEPS // 2:", 4)
        src.add("q0, gc0 = rq(), GCS[0]\nt = perf()\nwith torch.no_grad():", 8)
        src.add(f"    while perf() - t < {spec.slow_eval}:\n        out = net(XE)", 8)
        n = src.add("    acc = (out > 0).float().mean().item()", 8)
        src.add(f'own["passes"].append([i, "eval", {n}, perf() - t, GCS[0] - gc0, rq() - q0])', 8)


def _final(src: Source, spec: Spec) -> None:
    """A final test pass and a last save after the loop (after the last step: ``i`` is
    STEPS - 1, as the loop left it), each timed."""
    if spec.final:
        src.add("q0, gc0 = rq(), GCS[0]\nt = perf()\nwith torch.no_grad():\n    for _ in range(3):")
        src.add("        out = net(XE)")
        n = src.add("    acc = (out > 0).float().mean().item()")
        src.add(f'own["passes"].append([i, "final", {n}, perf() - t, GCS[0] - gc0, rq() - q0])')
        src.add("q0, gc0 = rq(), GCS[0]\nt = perf()\ntorch.save(model.state_dict(), CKPT)")
        src.add('own["checkpoints"].append([i, perf() - t, GCS[0] - gc0, rq() - q0])')
