"""perftop's bootstrap, put first on PYTHONPATH by ``perftop run``.

Every Python process of the job runs this at start-up, most of which never import torch
(a shell's helpers, a launcher, tools): for them it costs well under a millisecond. It only
puts a watch on ``sys.meta_path`` (``perftop/hook/importwatch.py``, loaded by path): the
hook itself loads once the process has imported torch. Then it hands over to any
``sitecustomize`` the environment already had, so a user's own keeps working, with what it
adds to ``sys.path`` (``site.addsitedir``, ``sys.path.append``). Never raises. Where the
hook cannot run (Python < 3.10, a failed load) it stays out silently: the monitor notices
the process never said hello and says why.

Written in the syntax Python 2.7 shares with Python 3 (no annotations, no f-strings: a test
checks), so that an old interpreter of the job reads it, does nothing, and says nothing.
"""

import os
import sys


def _perftop_debug(exc):
    if os.environ.get("PERFTOP_DEBUG"):
        sys.stderr.write("perftop: bootstrap failed: {!r}\n".format(exc))


def _perftop_compile_worker():
    """Whether this is torch.compile's compile worker (``.../compile_worker/__main__.py``)."""
    argv = getattr(sys, "argv", None) or [""]
    return os.path.join("_inductor", "compile_worker", "") in str(argv[0])


def _perftop_by_path(name, path, pkg=None):
    """Load the file at ``path`` as module ``name`` (``pkg``: a package's directory)."""
    import importlib.util

    if pkg is None:
        spec = importlib.util.spec_from_file_location(name, path)
    else:
        spec = importlib.util.spec_from_file_location(name, path, submodule_search_locations=[pkg])
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules[name] = mod
    try:
        spec.loader.exec_module(mod)  # type: ignore[union-attr]
    except BaseException:
        del sys.modules[name]
        raise
    return mod


def _perftop_load(here):
    """``perftop.hook``: imported, or, from another interpreter than perftop's, loaded by
    path (the package is stdlib-only) without putting perftop's site-packages on this
    interpreter's path. A failed load leaves no half-built ``perftop`` module behind."""
    try:
        import perftop.hook as hook

        return hook
    except ImportError:
        pass
    before = dict((k, v) for k, v in sys.modules.items() if k.split(".")[0] == "perftop")
    pkg = os.path.dirname(here)
    try:
        _perftop_by_path("perftop", os.path.join(pkg, "__init__.py"), pkg)
        import perftop.hook as hook

        return hook
    except BaseException:
        for k in [k for k in sys.modules if k.split(".")[0] == "perftop"]:
            del sys.modules[k]
        sys.modules.update(before)  # what the job had, as it had it
        raise


def _perftop_install(here):
    """Once torch has been imported: the hook, armed if a monitor answers."""

    def on_torch(torch):
        try:
            _perftop_load(here).install_from_env()
        except Exception as exc:
            _perftop_debug(exc)

    path = os.path.join(os.path.dirname(here), "hook", "importwatch.py")
    _perftop_by_path("_perftop_importwatch", path).after_import("torch", on_torch)


def _perftop_chain(here):
    """Import the next ``sitecustomize`` on the path, with only perftop's own entry taken
    out meanwhile: whatever that file adds to ``sys.path`` stays."""
    import importlib

    ours = sys.modules.pop("sitecustomize", None)
    removed = [(i, p) for i, p in enumerate(sys.path) if os.path.abspath(p or ".") == here]
    for _, p in reversed(removed):
        sys.path.remove(p)
    try:
        importlib.import_module("sitecustomize")
    except ImportError as exc:
        if getattr(exc, "name", "sitecustomize") != "sitecustomize":
            raise
        if ours is not None:
            sys.modules["sitecustomize"] = ours
    finally:
        for i, p in removed:  # back where it was; the rest of sys.path is the chain's
            sys.path.insert(min(i, len(sys.path)), p)


def _perftop_lines():
    """Where perftop takes the job's output into files (``PERFTOP_LINE_BUFFERED``, with
    ``PYTHONUNBUFFERED``): stdout and stderr line-buffered, as on a terminal, so that each
    line is one write and two processes' lines never tear into each other's (unbuffered, a
    ``print`` is two writes: its text, then its newline). Streams the job replaces later
    are its own."""
    if os.environ.get("PERFTOP_LINE_BUFFERED") != "1":
        return
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            try:
                reconfigure(line_buffering=True, write_through=False)
            except Exception as exc:
                _perftop_debug(exc)


def _perftop_boot():
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        _perftop_lines()
    except Exception as exc:
        _perftop_debug(exc)
    try:
        if os.environ.get("PERFTOP_SOCKET") and sys.version_info >= (3, 10):
            if _perftop_compile_worker():
                # torch.compile's compile workers (and their pools) get no hook at all.
                del os.environ["PERFTOP_SOCKET"]
            else:
                _perftop_install(here)
    except Exception as exc:
        _perftop_debug(exc)
    _perftop_chain(here)


_perftop_boot()
