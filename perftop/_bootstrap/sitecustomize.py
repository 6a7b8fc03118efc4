"""perftop's bootstrap, put first on PYTHONPATH by ``perftop run``.

Installs the hook when PERFTOP_SOCKET is set, then hands over to any ``sitecustomize`` the
environment already had, so a user's own keeps working. Never raises.
"""


def _perftop_boot() -> None:
    import importlib
    import importlib.util
    import os
    import sys

    here = os.path.dirname(os.path.abspath(__file__))
    try:
        if os.environ.get("PERFTOP_SOCKET"):
            try:
                import perftop.hook as hook
            except ImportError:
                # Another interpreter than perftop's: load the stdlib-only package by path,
                # without putting perftop's site-packages on this interpreter's path.
                pkg = os.path.dirname(here)
                spec = importlib.util.spec_from_file_location(
                    "perftop", os.path.join(pkg, "__init__.py"), submodule_search_locations=[pkg]
                )
                mod = importlib.util.module_from_spec(spec)
                sys.modules["perftop"] = mod
                spec.loader.exec_module(mod)
                import perftop.hook as hook
            hook.install_from_env()
    except Exception as exc:
        if os.environ.get("PERFTOP_DEBUG"):
            print(f"perftop: bootstrap failed: {exc!r}", file=sys.stderr)

    # Chain to the next sitecustomize on the path, if there is one.
    ours = sys.modules.pop("sitecustomize", None)
    saved = list(sys.path)
    try:
        sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
        importlib.import_module("sitecustomize")
    except ImportError as exc:
        if exc.name != "sitecustomize":
            raise
        if ours is not None:
            sys.modules["sitecustomize"] = ours
    finally:
        sys.path[:] = saved


_perftop_boot()
del _perftop_boot
