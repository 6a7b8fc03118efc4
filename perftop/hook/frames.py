"""Which stack frame is the user's: the line a sync site is reported at.

Each code object is one of three kinds, by its file:

- *internal*: torch's or perftop's package, the standard library, ``<frozen ...>`` and
  ``<string>`` modules, code torch.compile generated (``/tmp/torchinductor_*``, or
  ``$TORCHINDUCTOR_CACHE_DIR``), and the launchers pip writes for a package's commands
  (``venv/bin/litgpt``: ``sys.exit(main())``, every site of ``litgpt pretrain`` read
  ``litgpt:8``): never a site;
- *library*: code installed in site-packages (or dist-packages), which may sit inside the
  standard library's folder: transformers, lightning, accelerate...; the user cannot
  change it, so a sync there is reported at the innermost user frame that led to it, with
  the library frame kept as detail;
- *user*: everything else, perftop's bundled demo included.

Decisions are cached per code object (by its id), so walking a stack costs a dict lookup
per frame.

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
import tempfile
from types import CodeType, FrameType

from perftop import codepath

INTERNAL, LIBRARY, USER = 0, 1, 2
# id(code) -> (code, kind): hashing a code object hashes its contents (about 1 µs); its
# id is unique while the entry holds the code
_kinds: dict[int, tuple[CodeType, int]] = {}
_packages: tuple[str, ...] = ()  # torch and perftop: always internal ...
_demo: tuple[str, ...] = ()  # ... but perftop's bundled demo is the user's
_site: tuple[str, ...] = ()  # site-packages: libraries (it may lie inside the stdlib)
_stdlib: tuple[str, ...] = ()
_generated: tuple[str, ...] = ()  # torch.compile's generated code: never the user's
_scripts: tuple[str, ...] = ()  # where pip writes commands' launchers (no .py: not a script)
# torch files that only forward a call to ``__torch_function__`` (not callers of their own)
_PLUMBING = ("overrides.py", "functional.py", "_jit_internal.py", "_tensor.py")
_plumbing_files: frozenset[str] = frozenset()
_MODE_HANDLERS = frozenset({"__torch_function__", "__torch_dispatch__"})
_forwarders: dict[int, CodeType] = {}  # perftop's own wrappers of torch calls, by id


def forwarder(code: CodeType) -> None:
    """Frames of ``code`` forward a torch call: the site is their caller's line."""
    _forwarders[id(code)] = code


_ops: dict[tuple[int, int], tuple[CodeType, str]] = {}  # (id(code), lasti) -> code, op

# Where a sync was seen: (file, line, function) of the user's frame, then of the library
# frame that made the call (None when the user's own line made it), then the library's
# package. With no user frame on the stack, the first three are the library's line.
Where = tuple[str, int, str, str | None, int | None, str | None, str | None]


def _dir_of(module: str) -> str | None:
    mod = sys.modules.get(module)
    f = getattr(mod, "__file__", None)
    return os.path.dirname(os.path.abspath(f)) + os.sep if f else None


def configure() -> None:
    """Compute the path prefixes (after torch is imported)."""
    global _packages, _demo, _site, _stdlib, _plumbing_files, _generated, _scripts
    perftop_dir, torch_dir = _dir_of("perftop"), _dir_of("torch")
    paths = sysconfig.get_paths()

    def norm(keys: tuple[str, ...]) -> tuple[str, ...]:
        return tuple({os.path.abspath(paths[k]) + os.sep for k in keys if k in paths})

    _packages = tuple(p for p in (perftop_dir, torch_dir) if p)
    _demo = (perftop_dir + "demo" + os.sep,) if perftop_dir else ()
    _site = norm(("purelib", "platlib"))
    _stdlib = norm(("stdlib", "platstdlib"))
    _scripts = norm(("scripts",))
    _plumbing_files = frozenset(torch_dir + f for f in _PLUMBING) if torch_dir else frozenset()
    cache = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    tmp = os.path.join(os.path.abspath(tempfile.gettempdir()), "torchinductor_")
    _generated = (tmp, os.path.abspath(cache) + os.sep) if cache else (tmp,)
    _kinds.clear()


def _is_library(path: str) -> bool:
    return path.startswith(_site) or any(d in path for d in codepath.SITE_DIRS)


def kind_of_path(fn: str) -> int:
    """INTERNAL, LIBRARY or USER for a code object's file name."""
    if fn.startswith("<"):
        return INTERNAL
    path = os.path.abspath(fn)
    if path.startswith(_packages):
        return USER if _demo and path.startswith(_demo) else INTERNAL
    if _is_library(path):
        return LIBRARY
    if path.startswith(_stdlib) or path.startswith(_generated):
        return INTERNAL
    return INTERNAL if path.startswith(_scripts) and not path.endswith(".py") else USER


def library_path(fn: str) -> str | None:
    """A library file's path from its site-packages folder on, which names one file
    (``ignite/engine/__init__.py``); None for a file outside site-packages (this
    interpreter's, then any folder of that name: perftop/codepath.py)."""
    path = os.path.abspath(fn)
    for prefix in _site:
        if path.startswith(prefix):
            return path[len(prefix) :].replace(os.sep, "/") or None
    return codepath.library_path(path)


def package_of(fn: str) -> str | None:
    """The top-level package (or module) a library file belongs to: ``transformers``."""
    rest = library_path(fn)
    if not rest:
        return None
    top = rest.split("/", 1)[0]
    return top[:-3] if top.endswith(".py") else top


def kind_of(code: CodeType) -> int:
    got = _kinds.get(id(code))
    if got is not None and got[0] is code:
        return got[1]
    if not _packages and not _stdlib:
        configure()
    v = kind_of_path(code.co_filename)
    if len(_kinds) > 50000:
        _kinds.clear()
    _kinds[id(code)] = (code, v)
    return v


def is_internal(code: CodeType) -> bool:
    return kind_of(code) == INTERNAL


def first_outside(frame: FrameType | None) -> FrameType | None:
    """The innermost frame at or outside ``frame`` that is not internal (user or library)."""
    while frame is not None and kind_of(frame.f_code) == INTERNAL:
        frame = frame.f_back
    return frame


def direct_caller(frame: FrameType | None) -> FrameType | None:
    """The frame that called a torch function, past torch's ``__torch_function__``
    forwarding wrappers; None when that caller is itself internal (torch calling torch,
    such as an optimizer reading its step counter)."""
    while frame is not None and (
        frame.f_code.co_filename in _plumbing_files
        or frame.f_code.co_name in _MODE_HANDLERS
        or _forwarders.get(id(frame.f_code)) is frame.f_code
    ):  # a user's own mode above perftop's forwards the call: its caller is the site
        frame = frame.f_back
    if frame is None or kind_of(frame.f_code) == INTERNAL:
        return None
    return frame


def where(frame: FrameType) -> Where:
    """Where a sync made by ``frame`` (a user or library frame) is reported: at the user's
    innermost frame, with ``frame`` as the library detail when it is not the user's."""
    c = frame.f_code
    if kind_of(c) != LIBRARY:
        return (c.co_filename, frame.f_lineno, c.co_name, None, None, None, None)
    user = frame.f_back
    while user is not None and kind_of(user.f_code) != USER:
        user = user.f_back
    pkg = package_of(c.co_filename)
    if user is None:  # no user code on the stack: the library's own line, and its package
        return (c.co_filename, frame.f_lineno, c.co_name, None, None, None, pkg)
    u = user.f_code
    return (u.co_filename, user.f_lineno, u.co_name, c.co_filename, frame.f_lineno, c.co_name, pkg)


def op_at(frame: FrameType) -> str:
    """A short name for what ``frame`` is executing: ``item``, ``nonzero``, ``index``..."""
    code = frame.f_code
    key = (id(code), frame.f_lasti)
    got = _ops.get(key)
    if got is not None and got[0] is code:
        return got[1]
    try:
        op = _op_from_source(code, frame.f_lasti)
    except Exception:
        op = "sync"
    if len(_ops) > 50000:
        _ops.clear()
    _ops[key] = (code, op)
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
