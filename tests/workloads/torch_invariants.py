"""What a job sees of torch: run plain and under perftop, the two JSON files must be equal.

Imports every public torch submodule (walking the package) and ecosystem libraries, then
scripts, traces, compiles and exports small modules that use torch's grad modes as
decorators and context managers; records each result or error (type and message), the
signatures ``inspect`` reads, what pickling sees, and what the functions dynamo and the
job call are (their own code's file and line: a wrapper's is not torch's, whatever
``functools.wraps`` copies); trains a ``torch.compile(model)`` wrapper with its warnings
shown (stderr) and recorded. Writes the record to ``argv[1]``."""

from __future__ import annotations

import contextlib
import importlib
import inspect
import io
import json
import os
import pickle
import pkgutil
import re
import sys
import warnings
from pathlib import Path

import torch

OUT: dict[str, str] = {}
PASS = ["1"]
# Needs hardware or a toolchain this CPU host lacks; imported or not, the two runs agree
# anyway: this is only where a walk would take minutes (compilers' backends).
SLOW = ("torch._inductor", "torch.testing._internal", "torch.onnx._internal")
# The ecosystem's libraries whose programs the suite runs (issue 44), imported after the walk
ECOSYSTEM = ("ignite", "ignite.engine", "ignite.metrics", "ignite.handlers", "ignite.contrib",
             "stable_baselines3", "accelerate", "torch_geometric", "ray.train.torch")  # fmt: skip


def record(name: str, fn):
    buf = io.StringIO()
    try:
        with contextlib.redirect_stdout(buf), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = fn()
        text = repr(res)
    except BaseException as e:
        text = f"{type(e).__name__}: {' '.join(str(e).split())[:300]}"
    text += "|out:" + buf.getvalue() if buf.getvalue() else ""
    OUT[PASS[0] + " " + name] = re.sub(r"0x[0-9a-f]+", "0x?", text)  # addresses differ


def ident(obj) -> tuple:
    """What a function is, not what it says it is: where its own code lies (a wrapper's
    is perftop's, whatever ``functools.wraps`` copied onto it), its type and whether it
    wraps another."""
    code = getattr(getattr(obj, "__func__", obj), "__code__", None)
    where = None
    if code is not None:
        where = (os.path.relpath(code.co_filename, os.path.dirname(torch.__file__)),
                 code.co_firstlineno)  # fmt: skip
    return type(obj).__name__, where, hasattr(obj, "__wrapped__")


def walk() -> None:
    names = []
    for m in pkgutil.walk_packages(torch.__path__, "torch.", onerror=lambda _: None):
        parts = m.name.split(".")
        if any(p.startswith("_") for p in parts[1:]) or m.name.startswith(SLOW):
            continue
        names.append(m.name)
    for name in sorted(names):
        record("import " + name, lambda n=name: importlib.import_module(n).__name__)
    for lib in ECOSYSTEM:
        record("import " + lib, lambda n=lib: importlib.import_module(n).__name__)


class Modes(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            a = x * 2
        with torch.enable_grad():
            b = x + 1
        with torch.set_grad_enabled(False):
            c = x - 1
        with torch.autocast("cpu", enabled=False):
            d = x * 3
        return a + b + c + d


class Inference(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch.inference_mode():
            return x * 2


@torch.no_grad()
def deco_no_grad(x: torch.Tensor) -> torch.Tensor:
    return x * 2


@torch.enable_grad()
def deco_enable_grad(x: torch.Tensor) -> torch.Tensor:
    return x + 1


@torch.inference_mode()
def deco_inference(x: torch.Tensor) -> torch.Tensor:
    return x - 1


@torch.set_grad_enabled(False)
def deco_set_grad(x: torch.Tensor) -> torch.Tensor:
    return x * 5


@torch.autocast("cpu", dtype=torch.bfloat16)
def deco_autocast(x: torch.Tensor) -> torch.Tensor:
    return (x @ x.t()).float()


def scripted_fn(x: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        y = x * 2
    return y + 1


def show(t) -> str:
    if isinstance(t, torch.Tensor):
        return f"T{tuple(t.shape)} {t.dtype} rg={t.requires_grad} {t.detach().float().sum():.4f}"
    return repr(t)


def compiles() -> None:
    x = torch.arange(6.0).reshape(2, 3).requires_grad_()
    fns = {
        "deco_no_grad": deco_no_grad,
        "deco_enable_grad": deco_enable_grad,
        "deco_inference": deco_inference,
        "deco_set_grad": deco_set_grad,
        "deco_autocast": deco_autocast,
        "scripted_fn": scripted_fn,
    }
    mods = {"Modes": Modes(), "Inference": Inference()}
    for name, f in {**fns, **mods}.items():
        record(f"eager {name}", lambda f=f: show(f(x)))
        record(f"script {name}", lambda f=f: show(torch.jit.script(f)(x)))
        record(f"trace {name}", lambda f=f: show(torch.jit.trace(f, (x,), check_trace=False)(x)))
        record(f"compile {name}", lambda f=f: show(torch.compile(f, backend="eager")(x)))
    for name, m in mods.items():
        record(
            f"export {name}", lambda m=m: show(torch.export.export(m, (x.detach(),)).module()(x))
        )
    for name, obj in {
        "no_grad": torch.no_grad,
        "enable_grad": torch.enable_grad,
        "inference_mode": torch.inference_mode,
        "set_grad_enabled": torch.set_grad_enabled,
        "autocast": torch.autocast,
        "backward": torch.autograd.backward,
        "grad": torch.autograd.grad,
        "save": torch.save,
        "load": torch.load,
        "compile": torch.compile,
        "Module.compile": torch.nn.Module.compile,
        "Module.__call__": torch.nn.Module.__call__,
        "Tensor.to": torch.Tensor.to,
        "Tensor.backward": torch.Tensor.backward,
        "Optimizer.step": torch.optim.SGD.step,
        "DataLoader.__iter__": torch.utils.data.DataLoader.__iter__,
    }.items():
        record(f"signature {name}", lambda o=obj: str(inspect.signature(o)))
        record(f"source {name}", lambda o=obj: len(inspect.getsource(o)))
        record(f"pickle {name}", lambda o=obj: pickle.loads(pickle.dumps(o)) is o)
    import torch.utils.data.dataloader as dl
    from torch._dynamo.eval_frame import OptimizedModule

    for name, obj in {
        "compile": torch.compile,
        "Module.compile": vars(torch.nn.Module)["compile"],
        "Module.__call__": vars(torch.nn.Module)["__call__"],
        "OptimizedModule.__call__": vars(OptimizedModule)["__call__"],
        "OptimizedModule.__init__": vars(OptimizedModule)["__init__"],
        "dynamo.optimize": torch._dynamo.optimize,
        "_SingleProcessDataLoaderIter.__init__": vars(dl._SingleProcessDataLoaderIter)["__init__"],
        "_MultiProcessingDataLoaderIter.__init__": vars(dl._MultiProcessingDataLoaderIter)[
            "__init__"
        ],
    }.items():
        record(f"ident {name}", lambda o=obj: ident(o))
    for name, cls in {
        "no_grad": torch.no_grad,
        "enable_grad": torch.enable_grad,
        "set_grad_enabled": torch.set_grad_enabled,
        "inference_mode": torch.inference_mode,
    }.items():
        record(f"dict {name}", lambda c=cls: sorted(k for k in vars(c) if not k.startswith("__d")))
        for attr in ("__init__", "__enter__", "__exit__", "clone"):
            f = vars(cls).get(attr)
            if f is not None:
                record(f"code {name}.{attr}", lambda f=f: getattr(f, "__code__", f).co_filename)


def train() -> None:
    """A few real steps, so the hook's tracker is live during what follows."""
    m = torch.nn.Linear(3, 1)
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    for _ in range(3):
        loss = m(torch.randn(4, 3)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    buf = io.BytesIO()
    torch.save(m.state_dict(), buf)
    # each optimizer class's step, as torch wrapped it at its first optimizer, is torch's
    # wrapper (before anything compiled: dynamo in use changes nothing here either)
    for cls in (torch.optim.SGD, torch.optim.Adam, torch.optim.LBFGS):
        o = cls(m.parameters(), lr=0.1)
        o.step(lambda: m(torch.ones(1, 3)).sum())
        record(f"ident {cls.__name__}.step", lambda c=cls: ident(vars(c)["step"]))
    opt_patch = vars(torch.optim.Optimizer)["_patch_step_function"]
    record("ident Optimizer._patch_step_function", lambda: ident(opt_patch))


def safetensors_files() -> None:
    """perftop times safetensors' ``save_file`` (a checkpoint's model weights, HF's and
    accelerate's): what the job sees of it, and the file it writes, are safetensors' own."""
    import hashlib
    import tempfile

    import safetensors.torch as st

    for name in ("save_file", "save_model", "load_file"):
        obj = getattr(st, name)
        record(f"signature safetensors {name}", lambda o=obj: str(inspect.signature(o)))
        record(f"source safetensors {name}", lambda o=obj: len(inspect.getsource(o)))
        record(f"pickle safetensors {name}", lambda o=obj: pickle.loads(pickle.dumps(o)) is o)
    torch.manual_seed(0)
    m = torch.nn.Linear(3, 2)
    with tempfile.TemporaryDirectory() as d:
        for name, save in (("save_file", lambda f: st.save_file(m.state_dict(), f, {"a": "1"})),
                           ("save_model", lambda f: st.save_model(m, f))):  # fmt: skip
            f = f"{d}/{name}.safetensors"
            record(f"safetensors {name} bytes",
                   lambda s=save, f=f: (s(f), hashlib.sha256(Path(f).read_bytes()).hexdigest()))  # fmt: skip
        record("safetensors save_file error", lambda: st.save_file({"x": 1}, f"{d}/bad"))  # type: ignore[dict-item]


def compiled_model() -> None:
    """A torch.compile(model) wrapper trained between steps of the hook's tracker, with an
    evaluation through it (grad off) between steps: its warnings go to stderr as a job's
    would, and are recorded."""
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 1))
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    cm = torch.compile(m, backend="eager")
    x = torch.randn(4, 3)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        for i in range(4):
            loss = cm(x).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            if i == 1:
                with torch.no_grad():
                    cm(x)
    for w in seen:
        warnings.showwarning(w.message, w.category, w.filename, w.lineno)
    OUT[PASS[0] + " compiled model"] = show(cm(x))
    OUT[PASS[0] + " compiled model warnings"] = repr([str(w.message)[:120] for w in seen])


def before_training() -> None:
    """What the job calls before its first step is torch's own too (a data set sent to the
    device with ``.to``: perftop once wrapped it until the first step ended)."""
    for name in ("to", "cuda", "cpu"):
        record(
            f"ident Tensor.{name} before the first step",
            lambda n=name: ident(getattr(torch.Tensor, n)),
        )
        record(f"dict Tensor.{name} before the first step", lambda n=name: n in vars(torch.Tensor))


if __name__ == "__main__":
    before_training()
    train()
    safetensors_files()
    compiled_model()
    compiles()
    walk()
    PASS[0] = "2"
    train()
    compiled_model()
    compiles()  # again, after every import: the second time must agree too
    with open(sys.argv[1], "w") as f:
        json.dump(OUT, f, indent=0, sort_keys=True)
