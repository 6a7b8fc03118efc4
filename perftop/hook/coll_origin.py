"""Where a collective came from, from the Python stack c10d's flight recorder kept for it.

The recorder captures the launching thread's Python stack with each record (torch does
this itself, for every backend); the hook reads it with the ring, on its background thread.
From that stack, innermost frame first:

- ``call``: the ``torch.distributed`` function the code called (``all_reduce``,
  ``barrier``, ``reduce_scatter_single``), the outermost of ``distributed_c10d.py``'s own
  frames at the top of the stack; "" when the collective was launched from C++ (DDP's
  reducer) with no such frame. The recorder's op is what the backend did: gloo runs a
  ``reduce_scatter_single`` as an ``all_reduce`` of the whole buffer.
- ``phase``: the part of the step that launched it, by the innermost torch frame that
  names one: ``backward`` (``Tensor.backward``, ``torch.autograd.backward``/``grad``),
  ``optimizer`` (``torch.optim``, ``torch.distributed.optim``), ``data``
  (``torch.utils.data``), ``forward`` (a module's call), but ``backward`` for a forward
  inside a backward (activation checkpointing's recompute); "" when none does (the
  user's own code in the step, or a thread with no Python frames). The monitor adds ``between``
  for a collective outside the rank's steps, from its time.
- ``line``: the innermost user frame, ``file:line function`` (as the sync sites and a
  waiting collective's line are found: :mod:`perftop.hook.frames`).
"""

from __future__ import annotations

import os
import sys
from typing import Any

MAX_LINE = 300
_C10D = ("distributed_c10d.py", "c10d_logger.py")
# (path under torch's folder, function names or None for any): the phase it names
_PHASES = (
    ("_tensor.py", ("backward",), "backward"),
    (os.path.join("autograd", "__init__.py"), ("backward", "grad"), "backward"),
    (os.path.join("autograd", "graph.py"), ("_engine_run_backward",), "backward"),
    ("optim" + os.sep, None, "optimizer"),
    (os.path.join("distributed", "optim") + os.sep, None, "optimizer"),
    (os.path.join("utils", "data") + os.sep, None, "data"),
    (os.path.join("nn", "modules", "module.py"), ("_call_impl", "_wrapped_call_impl"), "forward"),
)
_kinds: dict[str, int] = {}  # file -> frames.kind_of_path (a few hundred files at most)
_torch_dir: list[str] = []


def _torch() -> str:
    if not _torch_dir:
        f = getattr(sys.modules.get("torch"), "__file__", None)
        _torch_dir.append(os.path.dirname(os.path.abspath(f)) + os.sep if f else "\0")
    return _torch_dir[0]


def _kind(fn: str) -> int:
    k = _kinds.get(fn)
    if k is None:
        from perftop.hook import frames

        if not frames._packages and not frames._stdlib:
            frames.configure()
        if len(_kinds) > 4096:
            _kinds.clear()
        k = _kinds[fn] = frames.kind_of_path(fn)
    return k


def _phase_of(fn: str, name: str, torch_dir: str) -> str:
    if not fn.startswith(torch_dir):
        return ""
    rest = fn[len(torch_dir) :]
    for path, names, phase in _PHASES:
        if rest.startswith(path) and (names is None or name in names):
            return phase
    return ""


def origin(stack: Any) -> tuple[str, str, str]:
    """``(call, phase, line)`` of a record's ``frames`` (innermost first); "" for each
    part the stack does not show."""
    from perftop.hook import frames

    if not stack:
        return "", "", ""
    torch_dir = _torch()
    call = ""
    for f in stack:
        fn = str(f.get("filename", ""))
        if not (fn.startswith(torch_dir) and fn.endswith(_C10D)):
            break
        if fn.endswith(_C10D[0]):
            call = str(f.get("name", ""))[:64]
    phases = [_phase_of(str(f.get("filename", "")), str(f.get("name", "")), torch_dir)
              for f in stack]  # fmt: skip
    phase = next((p for p in phases if p), "")  # the innermost: Lightning's closure runs
    if phase == "forward" and "backward" in phases:  # forward and backward in an optimizer's
        phase = "backward"  # step; a forward inside backward is a checkpoint's recompute
    line = ""
    for f in stack:
        fn = str(f.get("filename", ""))
        if _kind(fn) == frames.USER:
            line = f"{fn}:{int(f.get('line', 0))} {f.get('name', '')}"[-MAX_LINE:]
            break
    return call, phase, line
