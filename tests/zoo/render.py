"""A spec (tests/zoo/parts.py) rendered to a small, readable training loop."""

from __future__ import annotations

from tests.zoo.parts import ENGINE_EPOCH, Spec, Sync, loader_eval_at

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
       "checkpoints": [], "data_wait_s": 0.0, "depth": [], "blocked": [], "fwd_rq": [],
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
    # the thread's wait for a core so far, read as the forward returned (before the mark: a
    # read drops the GIL), so that from one to the next holds a preemption after the timer
    own["fwd_rq"].append(rq())
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
# Issue 44's wrappers over the DataLoader, an epoch at a time, fetching the next batch
# ahead: on the training thread (Ray Train's prepare_data_loader: an epoch's last batch
# makes no fetch), or on a thread of their own (stopped and joined at exit, as the feeders)
AHEAD = {
    "same": """\
class Ahead:  # wraps the DataLoader: the next batch is fetched before this one is used
    def __init__(self, loader):
        self.loader = loader
    def __iter__(self):
        it = iter(self.loader)
        nxt = next(it, None)
        while nxt is not None:
            cur, nxt = nxt, next(it, None)
            yield cur
""",
    "thread": """\
import atexit
stop, THREADS = threading.Event(), []
class Ahead:  # wraps the DataLoader: a thread fetches the next batch while a step runs
    def __init__(self, loader):
        self.loader = loader
    def __iter__(self):
        q = queue.Queue(maxsize=1)
        def offer(b):
            while not stop.is_set():
                try:
                    q.put(b, timeout=0.05)
                    return True
                except queue.Full:
                    pass
            return False
        def work():
            for b in self.loader:
                if not offer(b):
                    return
            offer(None)
        THREADS.append(threading.Thread(target=work, daemon=True))
        THREADS[-1].start()
        while (b := q.get()) is not None:
            yield b
atexit.register(lambda: (stop.set(), [t.join(5) for t in THREADS]))
""",
}
_AHEAD_FOREVER = """\
def forever():
    while True:
        yield from Ahead(loader)
"""

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
    "two_losses": (
        "opt = torch.optim.SGD(params[:2], lr=1e-3)\nopt2 = torch.optim.Adam(params[2:], lr=1e-4)"
    ),
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
    "two_losses": """\
opt.zero_grad()
loss = fwd(xb, yb)
loss.backward()
opt.step()
opt2.zero_grad()
loss = fwd(xb, yb)
loss.backward()
{pre}opt2.step()""",
    "accum": """\
opt.zero_grad()
for k in range(ACC):
    if k:
        xb, yb = batch(i)
    loss = fwd(xb, yb) / ACC
    loss.backward()
{pre}opt.step()""",
}

# accum with the step's micro-batches all fetched first (the HF Trainer's get_batch_samples),
# ACC = 4
UPFRONT = """\
opt.zero_grad()
micro = [(xb, yb)] + [batch(i) for _k in range(1, ACC)]
for xb, yb in micro:
    loss = fwd(xb, yb) / ACC
    loss.backward()
{pre}opt.step()"""

OPS = {
    "item": "_v = {x}.item()",
    "bool": "_v = bool({x} > 1e9)",
    "nonzero": "_v = torch.nonzero({x}.reshape(-1) > 0)",
    "format": '_v = f"{{{x}:.4f}}"',
    # a host copy read twice (issue 45 item 1): the copy is the site, its reads are not.
    # Of a tensor of its own (``.detach()``): on CPU ``metric.cpu()`` is ``metric``, the host
    # copy from then on (docs/steps.md), and another line's later read of it no site
    "cpu_read": "_h = {x}.detach().cpu(); _v = float(_h) + _h.item()",
}

# An RL environment (gymnasium's Env): its observation the next row of the held-out set,
# whatever the action (a simulator's own time is not the point: its step() between the
# policy's forwards is)
ENV = """\
import gymnasium


class ZooEnv(gymnasium.Env):
    def reset(self, *, seed=None, options=None):
        self.t = 0
        return XE[0], {}

    def step(self, action):
        self.t += 1
        return XE[self.t % len(XE)] + 0 * action.sum(), 0.0, False, False, {}


ENV = ZooEnv()
"""

# A connector pipeline between the policy's forward and the env's step (RLlib's): ~1,500
# small calls, the action passed on unchanged.
CONNECT = """\


def _item(k, v):
    return v + k


def connect(action):
    cols = {c: list(range(8)) for c in "abcd"}
    for k in range(40):
        cols = {c: [_item(k, v) for v in vs] for c, vs in cols.items()}
    return action
"""

TAIL = """\
own["wall_s"], own["cpu_s"] = perf() - T0, time.thread_time()
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
    if spec.explicit:
        src.add("import perftop  # its calls do nothing where the loop runs plainly")
    src.add("net = torch.compile(model)" if spec.compiled else "net = model")
    if spec.rollout:
        src.add(ENV)
        if spec.rollout_work:
            src.add(CONNECT)
    src.add(_data(spec))
    if spec.val:  # the evaluations' own loader: 3 batches of XE (22, 22, 20 rows)
        src.add(VAL_SETUP)
    src.add(UPDATE_SETUP[spec.update])
    if spec.upfront:  # 4 micro-batches: the third's forward came after a backward, no fetch
        src.add("ACC = 4")
    _engine_setup(src, spec)
    if spec.host_copy:
        src.add("HOST = []  # the host batch, kept beside its copy on the device")
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
    if spec.host_copy:  # the host batch, kept (ignite's engine.state.batch)
        src.add("    HOST[:] = [xb, yb]")
    if spec.data != "preloaded":
        src.add("    xb, yb = xb.to(device), yb.to(device)")
    src.add('    own.setdefault("batch_waits", []).append([i, perf() - t])  # and its transform')
    src.add("    return xb, yb\n\n")
    src.add("T0 = perf()\nfor i in range(STEPS):")
    src.add('own.setdefault("it_cpu", []).append(time.thread_time())  # each iteration\'s', 4)
    src.add("xb, yb = batch(i)", 4)
    pre = [s for s in spec.syncs if not s.after]
    body = (UPFRONT if spec.upfront else UPDATE[spec.update]).split("{pre}")
    src.add(body[0], 4)
    inner = 8 if spec.update == "lbfgs" else 4
    src.add("metric = loss.detach()", inner)
    for s in pre:  # in this iteration's step, before the update closes it
        _sync(src, s, inner, "i")
    host_lines = _host_copy(src, spec, inner)
    src.add(body[1], 4)
    if spec.explicit:  # the user's mark, right after the update
        src.add("perftop.step()", 4)
    src.add('own["steps"] += 1', 4)
    src.add("if i == 0:  # its one-time start (a worker spawned, lazy init) apart", 4)
    src.add('own["first_s"], own["first_cpu_s"] = perf() - T0, time.thread_time()', 8)
    src.add('own["depth"].append(torch._C._len_torch_function_stack())', 4)
    _after_work(src, spec)
    # After the update: in the next step, a pass or a checkpoint after it in this iteration
    # or not (an interval between steps begins where its pass does, gaps.py).
    for s in spec.syncs:
        if s.after:
            _sync(src, s, 4, "i + 1")
    if spec.engine:  # its handlers: after the update, in the next step
        src.add(ENGINE_FIRE, 4)
    _between(src, spec)
    _loader_eval(src, spec)
    _slow_eval(src, spec)
    _final(src, spec)
    if host_lines:
        src.add(f'own["host_lines"] += {host_lines!r}')
    src.add(f'own["periods"] = {src.periods!r}')
    src.add(TAIL)
    if spec.idle_s:  # after its count is written: not in the loop's wall time
        src.add(f"time.sleep({spec.idle_s})  # idle after the last step (a Ray worker)")
    return str(src)


# pytorch-ignite's shape: handlers registered on an engine's events, called by it
ENGINE = """\
import types


class Engine:
    def __init__(self):
        self.handlers = {}
        self.state = types.SimpleNamespace(iteration=0, epoch=0, output=None)

    def on(self, event):
        def add(fn):
            self.handlers.setdefault(event, []).append(fn)
            return fn
        return add

    def fire(self, event):
        for fn in self.handlers.get(event, ()):
            fn(self)


engine = Engine()


@engine.on("iteration_completed")
def log_iteration(engine):
    s = engine.state"""
ENGINE_FIRE = f"""\
engine.state.iteration, engine.state.output = i + 1, metric
engine.fire("iteration_completed")
if (i + 1) % {ENGINE_EPOCH} == 0:
    engine.state.epoch += 1
    engine.fire("epoch_completed")"""


def _engine_setup(src: Source, spec: Spec) -> None:
    """The engine and its two handlers: a log line of each iteration's loss and one of
    each epoch's (each a sync, counted in the next step: the engine calls them after the
    update)."""
    if not spec.engine:
        return
    src.add(ENGINE)
    line = len(src.lines) + 1
    src.periods[line] = 1
    src.add(f'_v = f"{{s.iteration}} {{s.output.item():.4f}}"; called({line}, s.iteration)', 4)
    src.add('\n\n@engine.on("epoch_completed")\ndef log_epoch(engine):\n    s = engine.state')
    line = len(src.lines) + 1
    src.periods[line] = ENGINE_EPOCH
    src.add(f"_v = float(s.output) + s.epoch; called({line}, s.iteration)", 4)


def _host_copy(src: Source, spec: Spec, indent: int) -> list[int]:
    """A value computed on the host from ``.cpu()``'s copy of the loss: a line that waits
    for nothing on any device; the ``.cpu()`` before it is a site of every step. Its line
    number. (The host batch kept beside its copy, ``HOST``, is not read: on CPU
    ``.to(device)`` returns it, and perftop takes what was sent for device data.)"""
    if not spec.host_copy:
        return []
    line = len(src.lines) + 1
    src.periods[line] = 1
    src.add(f"_h = loss.detach().cpu(); called({line}, i)", indent)
    host = src.add("_v = bool(_h > 0) or _h.item() == 0  # computed on the host", indent)
    return [host]


def _data(spec: Spec) -> str:
    """The data part, with its feeder's own time a batch (``FEED_S``)."""
    slow = spec.data == "thread" and spec.feed_ms
    data = DATA["thread_slow" if slow else spec.data]
    if spec.ahead:  # the DataLoader behind a wrapper that fetches ahead
        head, tail = data.split("def forever():\n    while True:\n        yield from loader\n")
        data = head + AHEAD[spec.ahead] + _AHEAD_FOREVER + tail
    return f"FEED_S = {spec.feed_ms / 1000}\n" + data


def _fields(spec: Spec) -> dict[str, object]:
    return {k: getattr(spec, k) for k in ("seed", "width", "batch", "steps")}


VAL_SETUP = """\
from torch.utils.data import DataLoader as _ValLoader, TensorDataset as _ValSet
VAL = _ValLoader(_ValSet(XE.cpu()), batch_size=22)
"""


def _eval_loop(spec: Spec) -> str:
    """An evaluation's loop of 3 forwards: over XE, or over the validation DataLoader
    under the spec's grad mode (its batches fetched with grad off open the pass)."""
    if not spec.val:
        return "with torch.no_grad():\n    for _ in range(3):\n        out = net(XE)"
    if spec.val == "grad_on":  # grad on, the model in eval mode (a validation's loss)
        return "net.eval()\nif True:\n    for (xv,) in VAL:\n        out = net(xv.to(device))\n    net.train()"
    mode = "torch.inference_mode()" if spec.val == "inference_mode" else "torch.no_grad()"
    return f"with {mode}:\n    for (xv,) in VAL:\n        out = net(xv.to(device))"


def _between(src: Source, spec: Spec) -> None:
    """An evaluation, a sampling pass and a checkpoint after some steps, each timed."""
    if spec.evaluate:
        src.add(f"if i % {spec.evaluate} == {spec.evaluate - 1}:", 4)
        src.add("q0, gc0, c0 = rq(), GCS[0], time.thread_time()\nt = perf()", 8)
        src.add(_eval_loop(spec), 8)
        n = src.add("    acc = (out > 0).float().mean().item()", 8)
        src.add(
            f'own["passes"].append([i, "eval", {n}, perf() - t, GCS[0] - gc0, rq() - q0, time.thread_time() - c0])',
            8,
        )
    if spec.sample:
        src.add(f"if i % {spec.sample} == {spec.sample - 1}:", 4)
        src.add(
            "q0, gc0, c0 = rq(), GCS[0], time.thread_time()\nt = perf()\nwith torch.no_grad():\n    z = XE[:2]\n    for _ in range(4):",
            8,
        )
        n = src.add("        tok = int(net(z).argmax())", 8)
        src.add(
            f'own["passes"].append([i, "sample", {n}, perf() - t, GCS[0] - gc0, rq() - q0, time.thread_time() - c0])',
            8,
        )
    if spec.rollout:
        src.add(f"if i % {spec.rollout} == {spec.rollout - 1}:", 4)
        src.add(
            "q0, gc0, c0 = rq(), GCS[0], time.thread_time()\nt = perf()\nobs = ENV.reset()[0]", 8
        )
        if spec.rollout_eval:  # tianshou's: grad on, the model in eval mode
            src.add("net.eval()\nif True:\n    for _ in range(6):", 8)
        else:
            src.add("with torch.no_grad():\n    for _ in range(6):", 8)
        act = "connect(net(obs[None])[0])" if spec.rollout_work else "net(obs[None])[0]"
        src.add(f"        obs = ENV.step({act})[0]", 8)
        n = src.add("    ret = float(obs.sum())", 8)
        if spec.rollout_eval:
            src.add("net.train()", 8)
        src.add(
            f'own["passes"].append([i, "rollout", {n}, perf() - t, GCS[0] - gc0, rq() - q0, time.thread_time() - c0])',
            8,
        )
    if spec.checkpoint:
        src.add(f"if i % {spec.checkpoint} == {spec.checkpoint - 1}:", 4)
        src.add(_save(spec), 8)
        src.add(
            'own["checkpoints"].append([i, perf() - t, GCS[0] - gc0, rq() - q0, time.thread_time() - c0])',
            8,
        )


def _save(spec: Spec) -> str:
    """A checkpoint: one ``torch.save``, or a burst of them (accelerate's ``save_state``:
    the model, the RNG state, a copy of some weights; torch work between them), timed from
    the first save. perftop's checkpoint is torch.save's own time (its signal); the
    ``state_dict()`` made before it is the next step's, as the loop's other code after the
    update is (docs/steps.md), so the loop makes it before its timer starts: 0.2 ms a call
    here, 1.3 ms at worst, on a module of two small layers (a loop whose timer held it read
    1 ms more than perftop on a loaded host)."""
    timer = "q0, gc0, c0 = rq(), GCS[0], time.thread_time()\nt = perf()\n"
    if not spec.save_burst:
        return "sd = model.state_dict()\n" + timer + "torch.save(sd, CKPT)"
    return (
        "sd = model.state_dict()\n" + timer + "torch.save(sd, CKPT)\n"
        'torch.save({"rng": torch.get_rng_state(), "step": i}, CKPT + ".rng")\n'
        'torch.save([p.detach().clone() for p in params[:2]], CKPT + ".ema")'
    )


def _loader_eval(src: Source, spec: Spec) -> None:
    """An evaluation over the training DataLoader's first 3 batches (a new iterator of it:
    its batches fetched with grad on, ``no_grad`` inside each iteration, as
    pytorch-ignite's ``evaluator.run(train_loader)`` does), timed; left before the
    loader's end (the training's iterator goes on)."""
    at = loader_eval_at(spec)
    if not at:
        return
    src.add(f"if i in {set(at)!r}:", 4)
    src.add("q0, gc0, c0 = rq(), GCS[0], time.thread_time()\nt = perf()", 8)
    src.add("for _k, (xe, _ye) in zip(range(3), loader):", 8)
    src.add("    with torch.no_grad():\n        out = net(xe.to(device))", 8)
    n = src.add("acc = (out > 0).float().mean().item()", 8)
    src.add(
        f'own["passes"].append([i, "eval", {n}, perf() - t, GCS[0] - gc0, rq() - q0, time.thread_time() - c0])',
        8,
    )


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
        src.add(
            "q0, gc0, c0 = rq(), GCS[0], time.thread_time()\nt = perf()\nwith torch.no_grad():", 8
        )
        src.add(f"    while perf() - t < {spec.slow_eval}:\n        out = net(XE)", 8)
        n = src.add("    acc = (out > 0).float().mean().item()", 8)
        src.add(
            f'own["passes"].append([i, "eval", {n}, perf() - t, GCS[0] - gc0, rq() - q0, time.thread_time() - c0])',
            8,
        )


def _final(src: Source, spec: Spec) -> None:
    """A final test pass and a last save after the loop (after the last step: ``i`` is
    STEPS - 1, as the loop left it), each timed."""
    if spec.final:
        src.add("q0, gc0, c0 = rq(), GCS[0], time.thread_time()\nt = perf()")
        src.add(_eval_loop(spec))
        n = src.add("    acc = (out > 0).float().mean().item()")
        src.add(
            f'own["passes"].append([i, "final", {n}, perf() - t, GCS[0] - gc0, rq() - q0, time.thread_time() - c0])'
        )
        src.add(_save(spec))
        src.add(
            'own["checkpoints"].append([i, perf() - t, GCS[0] - gc0, rq() - q0, time.thread_time() - c0])'
        )
