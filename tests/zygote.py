"""A warmed interpreter that runs the suite's *plain* reference jobs (the runs without
perftop that a test compares perftop's run against) by forking, so each skips the 3 CPU-s
of ``import torch`` and of the ``torch._dynamo`` import that an optimizer's first method
call makes: most of a short job's cost, paid ~100 times a suite. Runs under perftop are
never forked: they start as users start them (``perftop run python …``).

Run as a script by tests/plainrun.py, which sends one request a line on stdin
(``{"argv", "cwd", "env", "out", "err"}``) and reads two replies a run on stdout:
``{"pid"}`` once forked, ``{"rc"}`` once it exited. The child becomes what
``python SCRIPT ARGS`` (or ``python -c CODE ARGS``) would be: its own session, stdin
/dev/null, stdout and stderr to the given files, the cwd, the environment, argv,
``sys.path[0]`` and a fresh ``__main__``; it exits as the interpreter does (non-daemon
threads joined, atexit handlers run, streams flushed). Imports no module of the tests."""

from __future__ import annotations

import atexit
import builtins
import importlib
import io
import json
import os
import sys
import threading
import types
import warnings

DEFAULTS = list(warnings.filters)
if os.environ.get("PYTHONWARNINGS"):
    raise SystemExit("tests/zygote.py: started with PYTHONWARNINGS set; its children set theirs")
torch = importlib.import_module("torch")
importlib.import_module("torch._dynamo")  # what an optimizer's first method call imports
# the filters torch and its imports added, in front of the defaults, as in a fresh process
# where they go in front of the PYTHONWARNINGS ones too
ADDED = warnings.filters[: len(warnings.filters) - len(DEFAULTS)]
assert warnings.filters[len(ADDED) :] == DEFAULTS, "an import reordered the warnings filters"
CTL_IN, CTL_OUT = os.dup(0), os.dup(1)
_null = os.open(os.devnull, os.O_RDWR)
os.dup2(_null, 0)
os.dup2(_null, 1)
TORCH_RNG = torch.random.get_rng_state()


def _stream(fd: int, errors: str, unbuffered: bool) -> io.TextIOWrapper:
    """The stream a fresh interpreter makes on a file: block-buffered unless
    PYTHONUNBUFFERED (the environment's, as the child's interpreter would read it)."""
    raw = io.FileIO(fd, "w", closefd=False)
    buf: io.RawIOBase | io.BufferedWriter = raw if unbuffered else io.BufferedWriter(raw)
    return io.TextIOWrapper(buf, encoding="utf-8", errors=errors, write_through=unbuffered)  # type: ignore[arg-type]


def _exit_code(value: object) -> int:
    if value is None:
        return 0
    if isinstance(value, int):
        return value
    print(value, file=sys.stderr)
    return 1


def _run(argv: list[str]) -> int:
    main = types.ModuleType("__main__")
    main.__dict__["__builtins__"] = builtins
    if argv[0] == "-c":
        name, source = "<string>", argv[1].encode()
        sys.argv, sys.path[0] = ["-c", *argv[2:]], ""
    else:
        name = argv[0]
        with open(name, "rb") as f:
            source = f.read()
        main.__file__ = name
        main.__dict__["__cached__"] = None
        sys.argv, sys.path[0] = list(argv), os.path.dirname(os.path.abspath(name))
    sys.modules["__main__"] = main
    try:
        exec(compile(source, name, "exec", dont_inherit=True), main.__dict__)
    except SystemExit as e:
        return _exit_code(e.code)
    except BaseException as e:  # printed as the interpreter prints it, without this frame
        if e.__traceback__ is not None:
            e.__traceback__ = e.__traceback__.tb_next
        sys.excepthook(type(e), e, e.__traceback__)
        return 130 if isinstance(e, KeyboardInterrupt) else 1
    return 0


def _child(req: dict) -> None:
    code = 1
    try:
        os.setsid()
        os.close(CTL_IN)
        os.close(CTL_OUT)
        os.dup2(_null, 0)
        for fd, path in ((1, req["out"]), (2, req["err"])):
            f = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.dup2(f, fd)
            os.close(f)
        os.chdir(req["cwd"])
        os.environ.clear()
        os.environ.update(req["env"])
        unbuffered = bool(os.environ.get("PYTHONUNBUFFERED"))
        sys.stdin = sys.__stdin__ = open(0, encoding="utf-8", closefd=False)  # noqa: SIM115
        sys.stdout = sys.__stdout__ = _stream(1, "strict", unbuffered)
        sys.stderr = sys.__stderr__ = _stream(2, "backslashreplace", unbuffered)
        sys.dont_write_bytecode = bool(os.environ.get("PYTHONDONTWRITEBYTECODE"))
        sys.warnoptions[:] = [w for w in os.environ.get("PYTHONWARNINGS", "").split(",") if w]
        warnings.filters[:] = DEFAULTS
        warnings._processoptions(sys.warnoptions)  # type: ignore[attr-defined]
        warnings.filters[:0] = ADDED
        warnings._filters_mutated()  # type: ignore[attr-defined]
        torch.random.set_rng_state(TORCH_RNG)
        code = _run(req["argv"])
        threading._shutdown()  # type: ignore[attr-defined]
        atexit._run_exitfuncs()
    except BaseException:
        code = code or 1
    finally:
        for s in (sys.stdout, sys.stderr):
            try:
                s.flush()
            except BaseException:
                pass
        os._exit(code & 0xFF)


def main() -> None:
    ctl_in = os.fdopen(CTL_IN, "rb", buffering=0)
    ctl_out = os.fdopen(CTL_OUT, "wb", buffering=0)
    for line in iter(ctl_in.readline, b""):
        req = json.loads(line)
        pid = os.fork()
        if pid == 0:
            _child(req)
        ctl_out.write(json.dumps({"pid": pid}).encode() + b"\n")
        _, status = os.waitpid(pid, 0)
        ctl_out.write(json.dumps({"rc": os.waitstatus_to_exitcode(status)}).encode() + b"\n")


if __name__ == "__main__":
    main()
