"""Torch calls that the sync detector makes on the job's behalf, made from the job's line.

A ``TorchFunctionMode`` gets each torch call and must make it itself, so the frame that
calls the op is the mode's, not the job's. Warnings are placed by frames: a C++ warning
(``TORCH_WARN``) is attributed to the innermost Python frame, a Python one
(``warnings.warn(..., stacklevel=2)`` in ``F.softmax``) to its caller's caller. Called
from perftop's frame, a warning the job would see at its own line (and filter by its own
module, and show once per line) read ``perftop/hook/sync_detect.py:219`` instead, under
perftop's module and once for all lines.

So the detector calls through :func:`runner`: a one-line function whose code names the
job's file and line and whose globals are the job frame's own (the module name and the
``__warningregistry__`` the warnings machinery reads). A warning then reads as it reads
plain, and is filtered and shown once exactly as it is plain. In a traceback that frame
would be a second copy of the job's line: :func:`unsplice` takes it out of an exception
passing through.
"""

from __future__ import annotations

from collections.abc import Callable
from types import CodeType, FunctionType, TracebackType
from typing import Any

MAX_SITES = 4096  # the made runners kept (a job has a few hundred torch lines at most)
LOOK_UP = 6  # frames searched for a Python torch function's outer call

_SOURCE = "def __perftop_call__(__f, __a, __k): return __f(*__a, **__k)"


def _template() -> CodeType:
    ns: dict[str, Any] = {}
    exec(compile(_SOURCE, "<perftop>", "exec"), ns)
    code: CodeType = ns["__perftop_call__"].__code__
    return code


_CODE = _template()
_NAMES = _CODE.co_varnames
_QUALNAME = hasattr(_CODE, "co_qualname")
Runner = Callable[[Any, tuple[Any, ...], dict[str, Any]], Any]
plain: Runner = FunctionType(_CODE, {})  # where the job's frame cannot be found
_made: dict[tuple[int, int, int], tuple[CodeType, Runner]] = {}


def home(func: Any, frame: Any) -> Any:
    """The frame whose line a plain run would call ``func`` from. ``frame`` is the one
    that called the mode: for an op written in C, the job's own frame; for a torch
    function written in Python, torch's dispatch (``handle_torch_function``) called from
    inside that function's own first call, whose caller is the job's frame."""
    code = getattr(func, "__code__", None)
    if code is None:
        return frame
    f = frame
    for _ in range(LOOK_UP):
        if f is None:
            break
        if f.f_code is code:
            return f.f_back or frame
        f = f.f_back
    return frame


def runner(func: Any, frame: Any) -> Runner:
    """A caller of ``func(*args, **kwargs)`` whose frame reads as the job's line (see
    the module); :data:`plain` where that cannot be made. Kept by the calling code and
    instruction (a line table's look-up costs more than the call it is for)."""
    try:
        f = frame if type(func) is not FunctionType else home(func, frame)
        code, globals_ = f.f_code, f.f_globals
        key = (id(code), f.f_lasti, id(globals_))
        got = _made.get(key)
        if got is not None and got[0] is code:
            return got[1]
        line = f.f_lineno or code.co_firstlineno or 1
        if len(_made) >= MAX_SITES:
            _made.clear()
        names = {"co_filename": code.co_filename, "co_name": code.co_name}
        if _QUALNAME:  # Python 3.11 and later
            names["co_qualname"] = code.co_qualname
        made = _CODE.replace(co_firstlineno=max(1, line), **names)
        # the entry holds the code and the globals: neither id is reused while it is kept
        run: Runner = FunctionType(made, globals_)
        _made[key] = (code, run)
        return run
    except Exception:
        return plain


def unsplice(exc: BaseException) -> None:
    """Take the runners' frames out of ``exc``'s traceback (they repeat the job's line)."""
    try:
        tb: TracebackType | None = exc.__traceback__
        while tb is not None:
            nxt = tb.tb_next
            if nxt is not None and nxt.tb_frame.f_code.co_varnames == _NAMES:
                tb.tb_next = nxt.tb_next
                continue
            tb = nxt
    except Exception:
        pass
