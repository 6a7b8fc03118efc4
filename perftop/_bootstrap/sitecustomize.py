"""perftop's bootstrap, put first on PYTHONPATH by ``perftop run``.

Installs the hook when PERFTOP_SOCKET is set, then hands over to any ``sitecustomize`` the
environment already had, so a user's own keeps working, with what it adds to ``sys.path``
(``site.addsitedir``, ``sys.path.append``). Never raises. Where the hook cannot run
(Python < 3.10, a failed load) it stays out silently: the monitor notices the process
never said hello and says why.
"""

import types  # loaded at start-up already (by site): costs nothing


def _perftop_compile_worker() -> bool:
    """Whether this is torch.compile's compile worker (``.../compile_worker/__main__.py``)."""
    import os
    import sys

    argv = getattr(sys, "argv", None) or [""]
    return os.path.join("_inductor", "compile_worker", "") in str(argv[0])


def _perftop_load(here: str) -> types.ModuleType:
    """``perftop.hook``: imported, or, from another interpreter than perftop's, loaded by
    path (the package is stdlib-only) without putting perftop's site-packages on this
    interpreter's path. A failed load leaves no half-built ``perftop`` module behind."""
    import importlib.util
    import os
    import sys

    try:
        import perftop.hook as hook

        return hook
    except ImportError:
        pass
    before = {k: v for k, v in sys.modules.items() if k == "perftop" or k.startswith("perftop.")}
    pkg = os.path.dirname(here)
    try:
        spec = importlib.util.spec_from_file_location(
            "perftop", os.path.join(pkg, "__init__.py"), submodule_search_locations=[pkg]
        )
        mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
        sys.modules["perftop"] = mod
        spec.loader.exec_module(mod)  # type: ignore[union-attr]
        import perftop.hook as hook

        return hook
    except BaseException:
        for k in [k for k in sys.modules if k == "perftop" or k.startswith("perftop.")]:
            del sys.modules[k]
        sys.modules.update(before)  # what the job had, as it had it
        raise


def _perftop_chain(here: str) -> None:
    """Import the next ``sitecustomize`` on the path, with only perftop's own entry taken
    out meanwhile: whatever that file adds to ``sys.path`` stays."""
    import importlib
    import os
    import sys

    ours = sys.modules.pop("sitecustomize", None)
    removed = [(i, p) for i, p in enumerate(sys.path) if os.path.abspath(p or ".") == here]
    for _, p in reversed(removed):
        sys.path.remove(p)
    try:
        importlib.import_module("sitecustomize")
    except ImportError as exc:
        if exc.name != "sitecustomize":
            raise
        if ours is not None:
            sys.modules["sitecustomize"] = ours
    finally:
        for i, p in removed:  # back where it was; the rest of sys.path is the chain's
            sys.path.insert(min(i, len(sys.path)), p)


def _perftop_boot() -> None:
    import os
    import sys

    here = os.path.dirname(os.path.abspath(__file__))
    try:
        if os.environ.get("PERFTOP_SOCKET") and sys.version_info >= (3, 10):
            if _perftop_compile_worker():
                # torch.compile's compile workers (and their pools) get no hook at all.
                del os.environ["PERFTOP_SOCKET"]
            else:
                _perftop_load(here).install_from_env()
    except Exception as exc:
        if os.environ.get("PERFTOP_DEBUG"):
            print(f"perftop: bootstrap failed: {exc!r}", file=sys.stderr)
    _perftop_chain(here)


_perftop_boot()
