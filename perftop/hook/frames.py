"""Which stack frame is the user's: the line a sync site is reported at.

A frame is *internal* when its file lies in torch's or perftop's package, the standard
library, or is a ``<frozen ...>``/``<string>`` module. perftop's bundled demo and code
installed in site-packages (which may sit inside the standard library's folder) are the
user's. Decisions are cached per code
object, so walking a stack costs a dict lookup per frame.

The op a line ran is named from the line's own source (the call or subscript expression
at the frame's current instruction), cached per (code, instruction): the CUDA sync debug
warning says only "called a synchronizing CUDA operation", not which op.
"""

from __future__ import annotations

import ast
import linecache
import os
import sys
import sysconfig
from types import CodeType, FrameType

_internal: dict[CodeType, bool] = {}
_packages: tuple[str, ...] = ()  # torch and perftop: always internal ...
_demo: tuple[str, ...] = ()  # ... but perftop's bundled demo is the user's
_site: tuple[str, ...] = ()  # site-packages: the user's (it may lie inside the stdlib)
_stdlib: tuple[str, ...] = ()
# torch files that only forward a call to ``__torch_function__`` (not callers of their own)
_PLUMBING = ("overrides.py", "functional.py", "_jit_internal.py", "_tensor.py")
_plumbing_files: frozenset[str] = frozenset()
_ops: dict[tuple[CodeType, int], str] = {}


def _dir_of(module: str) -> str | None:
    mod = sys.modules.get(module)
    f = getattr(mod, "__file__", None)
    return os.path.dirname(os.path.abspath(f)) + os.sep if f else None


def configure() -> None:
    """Compute the path prefixes (after torch is imported)."""
    global _packages, _demo, _site, _stdlib, _plumbing_files
    perftop_dir, torch_dir = _dir_of("perftop"), _dir_of("torch")
    paths = sysconfig.get_paths()

    def norm(keys: tuple[str, ...]) -> tuple[str, ...]:
        return tuple({os.path.abspath(paths[k]) + os.sep for k in keys if k in paths})

    _packages = tuple(p for p in (perftop_dir, torch_dir) if p)
    _demo = (perftop_dir + "demo" + os.sep,) if perftop_dir else ()
    _site = norm(("purelib", "platlib"))
    _stdlib = norm(("stdlib", "platstdlib"))
    _plumbing_files = frozenset(torch_dir + f for f in _PLUMBING) if torch_dir else frozenset()
    _internal.clear()


def _is_internal_path(fn: str) -> bool:
    if fn.startswith("<"):
        return True
    path = os.path.abspath(fn)
    if path.startswith(_packages):
        return not path.startswith(_demo) if _demo else True
    if path.startswith(_site):
        return False
    return path.startswith(_stdlib)


def is_internal(code: CodeType) -> bool:
    v = _internal.get(code)
    if v is None:
        if not _packages and not _stdlib:
            configure()
        v = _is_internal_path(code.co_filename)
        if len(_internal) > 50000:
            _internal.clear()
        _internal[code] = v
    return v


def first_user_frame(frame: FrameType | None) -> FrameType | None:
    """The innermost frame at or outside ``frame`` that is user code."""
    while frame is not None and is_internal(frame.f_code):
        frame = frame.f_back
    return frame


def direct_caller(frame: FrameType | None) -> FrameType | None:
    """The frame that called a torch function, past torch's ``__torch_function__``
    forwarding wrappers; None when that caller is itself internal (torch calling torch,
    such as an optimizer reading its step counter)."""
    while frame is not None and frame.f_code.co_filename in _plumbing_files:
        frame = frame.f_back
    if frame is None or is_internal(frame.f_code):
        return None
    return frame


def op_at(frame: FrameType) -> str:
    """A short name for what ``frame`` is executing: ``item``, ``nonzero``, ``index``..."""
    key = (frame.f_code, frame.f_lasti)
    op = _ops.get(key)
    if op is None:
        try:
            op = _op_from_source(frame.f_code, frame.f_lasti)
        except Exception:
            op = "sync"
        if len(_ops) > 50000:
            _ops.clear()
        _ops[key] = op
    return op


def _op_from_source(code: CodeType, lasti: int) -> str:
    positions = getattr(code, "co_positions", None)  # Python 3.11+
    if positions is None:
        return "sync"
    pos = list(positions())[lasti // 2]
    line, end_line, col, end_col = pos
    if line is None or end_line is None or col is None or end_col is None:
        return "sync"
    lines = [linecache.getline(code.co_filename, n) for n in range(line, end_line + 1)]
    if not lines or not lines[0]:
        return "sync"
    # columns are UTF-8 byte offsets
    raw = [ln.encode() for ln in lines]
    if len(raw) == 1:
        text = raw[0][col:end_col]
    else:
        text = raw[0][col:] + b"".join(raw[1:-1]) + raw[-1][:end_col]
    return _name_expr(text.decode(errors="replace"))


def _name_expr(text: str) -> str:
    try:
        node = ast.parse(text.strip(), mode="eval").body
    except SyntaxError:
        return "bool" if text.strip() else "sync"
    if isinstance(node, ast.Call):
        f = node.func
        if isinstance(f, ast.Attribute):
            return f.attr
        if isinstance(f, ast.Name):
            return f.id
    if isinstance(node, ast.Subscript):
        return "index"
    if isinstance(node, ast.Compare | ast.BoolOp | ast.UnaryOp | ast.Name):
        return "bool"
    return "sync"
