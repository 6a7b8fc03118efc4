"""Where a ``no_grad`` region or a pass's module call was made: the first frame outside
torch and perftop (the job's line), or None where torch's own housekeeping made it. Apart
from gaps.py's intervals: it reads only frames, never the tracker, and keeps each file's kind
(a loop without an optimizer looks a site up per step).
"""

from __future__ import annotations

import os
import sys
from typing import Any

from perftop.hook import frames

# Where a no_grad region is torch's own housekeeping, not a pass over data: a module's
# .to()/.cpu() (Module._apply), weight init, an optimizer's or clipping's internals.
# A forward run by autograd (a Function's, activation checkpointing's recomputation) is a
# step's own work, never a pass.
_HOUSEKEEPING = (
    *(os.sep + os.path.join("torch", d) + os.sep for d in ("nn", "optim", "autograd")),
    os.sep + os.path.join("torch", "utils", "checkpoint.py"),
)
_MODULE_CALL = os.sep + os.path.join("torch", "nn", "modules", "module.py")
_OURS = os.sep + os.path.join("perftop", "hook") + os.sep
_TORCH = os.sep + "torch" + os.sep  # torch's own frames: a decorator's wrapper
_MAX_SITES = 4096  # sites remembered (code lines: a real loop has a handful)


_ANON = frozenset(("<lambda>", "<genexpr>", "<listcomp>", "<dictcomp>", "<setcomp>"))
_GENERATOR = 0x20  # inspect.CO_GENERATOR: a wrapper yielding a loader's batches
_ANY_ARGS = 0x04 | 0x08  # inspect.CO_VARARGS | CO_VARKEYWORDS


def fetch_site() -> Any:
    """Where a batch was fetched (a pass's first batch, pending: rare), as ``_site`` has
    it: the first frame outside torch and perftop that is not a generator (a wrapper
    yielding the loader's batches, accelerate's ``DataLoaderShard.__iter__``), so the
    loop's function: the HF Trainer's ``evaluation_loop``. None where none is found."""
    return _first_user(sys._getframe(1), 16, _GENERATOR, False)


def loop_name(name: Any, fetched: Any) -> Any:
    """The site that names a pass whose forward was made at ``name`` after a batch fetched
    at ``fetched``: the fetching function where both are a library's functions in one file
    and differ (the HF Trainer's evaluation makes its forward in ``compute_loss``, under
    ``prediction_step``, in ``evaluation_loop``'s loop over the batches: "evaluation_loop"
    says what ran), else ``name`` (a script's own function, as Lightning's
    ``validation_step``; ignite's ``evaluate_step``, whose engine loops in another file)."""
    if name is None or fetched is None:
        return name
    code, loop = name[0], fetched[0]
    if loop is code or loop.co_filename != code.co_filename:
        return name
    return fetched if frames.kind_of(code) == frames.LIBRARY else name


def site() -> tuple[Any, Any]:
    """The call site of the module call being made (a forward hook's caller), as ``_site``,
    and the site that names it: the same, or where a lambda or comprehension was called
    (ignite's evaluator calls the model in its default ``model_fn``, a lambda, from its
    ``evaluate_step``), or where a library's generic call wrapper was called (Keras's
    ``Layer.__call__(*args, **kwargs)``, under its ``error_handler`` decorator, from its
    ``test_step``): a name that says what ran."""
    key = _site()
    if key is None or not _wraps(key[0]):
        return key, key
    f: Any = sys._getframe(1)
    while f is not None and f.f_code is not key[0]:
        f = f.f_back
    for _ in range(8):
        if f is None or not _wraps(f.f_code):
            break
        f = f.f_back
    return key, ((f.f_code, f.f_lasti) if f is not None else key)


def _wraps(code: Any) -> bool:
    """A frame that names nothing: a lambda or comprehension, or a library's function taking
    any arguments (``*args, **kwargs``: a ``__call__`` or a decorator's wrapper)."""
    if code.co_name in _ANON:
        return True
    return code.co_flags & _ANY_ARGS == _ANY_ARGS and frames.kind_of(code) == frames.LIBRARY


def _site() -> Any:
    """Where the region was entered: the code and line of the first frame that is neither
    perftop's nor torch's (a ``with`` line; for a decorated function, the line calling
    it); None where torch.nn or torch.optim code entered it (a module's ``.cpu()`` around
    a checkpoint, clipping, init: housekeeping). Per step in a loop without an optimizer
    (its update's region): each file's kind is looked up once."""
    return _first_user(sys._getframe(1), 12, 0, True)


def _first_user(f: Any, depth: int, skip_flags: int, house_ends: bool) -> Any:
    """(code, instruction) of the first of ``depth`` frames from ``f`` outward that is the
    job's (a library's or the script's), none of whose code flags are in ``skip_flags``;
    None where there is none, or where torch's housekeeping comes first (``house_ends``)."""
    kinds = _FILE_KINDS
    for _ in range(depth):
        if f is None:
            return None
        code = f.f_code
        kind = kinds.get(code.co_filename)
        if kind is None:
            kind = _file_kind(code.co_filename)
        if kind == _USER and not code.co_flags & skip_flags:
            return (code, f.f_lasti)  # the instruction: cheaper than its line
        if kind == _HOUSE and house_ends:
            return None
        f = f.f_back
    return None


_USER, _SKIP, _HOUSE = 0, 1, 2
_FILE_KINDS: dict[str, int] = {}


def _file_kind(name: str) -> int:
    if _OURS in name or name.endswith(_MODULE_CALL):
        kind = _SKIP  # perftop's frames; Module.__call__'s machinery around a forward
    elif any(p in name for p in _HOUSEKEEPING):
        kind = _HOUSE
    else:
        kind = _SKIP if _TORCH in name else _USER
    if len(_FILE_KINDS) < _MAX_SITES:
        _FILE_KINDS[name] = kind
    return kind
