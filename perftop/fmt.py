"""Number formatting shared by the text report and the TUI: units, and "N/A" for None; and
the JSON report's rounding (:func:`rounded`), shared by its builders."""

from __future__ import annotations

import signal
from collections.abc import Iterable

from perftop.safe import visible_line

NA = "N/A"


class Block(str):
    """Lines perftop laid out itself (a table, its cells each made one line): the one
    kind of text whose newlines :func:`lines` keeps."""


def lines(items: Iterable[str]) -> str:
    """The report's lines joined, each one line: a job's string in one (a dataset's class
    name, a function's, a path) could hold a newline and forge a line of its own (a hint,
    a table's row); it is shown as ``^J``, as every other control character. A
    :class:`Block` keeps its own."""
    return "\n".join(x if isinstance(x, Block) else visible_line(x) for x in items)


def step_no(index: int) -> int:
    """A step's number as the user counts it and ``--from-step`` takes it (1 = the first):
    events and the JSON report carry a step's index from 0 (a stall's ``step`` 44 is the
    45th step, ``--from-step 45``)."""
    return index + 1


WHAT_HANGS = {
    "eval": "evaluation",
    "checkpoint": "checkpoint",
    "report": "Ray Train's report",
    "collective": "a collective",
}


def stall_words(
    step: int,
    pid: int,
    stalled_s: float,
    median_s: float,
    during: str,
    tail: tuple[int, float] | None = None,
) -> tuple[str, str]:
    """(what, how long) of a stall capture, for the report and the Stacks panel: a step
    stalled, or (``during``) an evaluation or checkpoint between steps that hangs, or a
    collective that hangs (``collective``); ``tail``: a stalled step that never came, the
    job having ended well, as (its last step's index, the seconds from its end to the
    capture) (model.stacks.after_last_step)."""
    if tail is not None and not during:
        return (
            f"after the last step ({step_no(tail[0])}) of pid {pid}",
            f"no step in the {tail[1]:.1f} s to the capture nor after it, to the job's end: "
            "work after training",
        )
    if not during:
        return (
            f"step {step_no(step)} of pid {pid}",
            f"stalled {stalled_s:.1f} s when captured (median step {median_s:.3f} s)",
        )
    what = WHAT_HANGS.get(during, during)
    if during == "collective":  # median_s: the hang's threshold
        return (
            f"{what} in step {step_no(step)} of pid {pid}",
            f"waited {stalled_s:.1f} s when captured (hang threshold {median_s:.1f} s)",
        )
    usual = f"earlier ones took {median_s:.3f} s on average" if median_s else "the first one"
    # (``step``, the next step's index, is the number of the step before the pass)
    return f"{what} after step {step} of pid {pid}", f"hung {stalled_s:.1f} s ({usual})"


HELD = {
    "stopped": "stopped (state T: a SIGSTOP, a shell's Ctrl-Z or a job scheduler's suspend; "
    "kill -CONT {pid} resumes it)",
    "tracing-stop": "stopped by a tracer (state t: a debugger holds it)",
    "disk-sleep": "in uninterruptible sleep (state D: waiting on a disk, a network "
    "filesystem or a driver)",
}


HELD_SHORT = {"stopped": "stopped", "tracing-stop": "stopped by a tracer",
              "disk-sleep": "in uninterruptible sleep"}  # fmt: skip


def held_words(state: str, pid: int) -> str:
    """What a held process's state (``events.stacks.HELD_STATES``) means, in a few words
    ("" for any other): why it made no progress, whatever its stack says."""
    return HELD.get(state, "").format(pid=pid)


# What a signal that killed a process of a training job most often means.
SIGNAL_CAUSE = {
    9: "the kernel's OOM killer sends it when memory runs out (dmesg, or the cgroup's "
    "memory.events, says so), else a kill -9",
    15: "a request to stop: a launcher stopping the others after one failed, a scheduler, a kill",
    11: "a crash in native code (a segfault)",
    6: "an abort in native code (a failed check, an uncaught C++ exception)",
    7: "a bus error: for a DataLoader worker, most often /dev/shm full",
    2: "an interrupt (Ctrl-C)",
}


def signal_name(n: int) -> str:
    """``SIGKILL`` for 9; a number no signal has (a hostile recording's) as ``signal N``."""
    try:
        return signal.Signals(n).name
    except ValueError:
        return f"signal {n}"


def exit_words(code: int | None, sig: int | None) -> str:
    """How a process ended, in a few words ("" where that is not known): ``killed by
    SIGKILL``, ``exited with code 1``, ``exited``."""
    if sig is not None:
        return f"killed by {signal_name(sig)}"
    if code is None:
        return ""
    return f"exited with code {code}" if code else "exited"


def exit_tag(code: int | None, sig: int | None) -> str:
    """A table's word for an abnormal end ("" for a clean one): ``SIGKILL``, ``exit 1``."""
    if sig is not None:
        return signal_name(sig)
    return f"exit {code}" if code else ""


def seconds(x: float | None) -> str:
    """A duration: 850µs, 12.3ms, 123ms, 1.25s, 2m05s, 1h02m05s."""
    if x is None:
        return NA
    if x < 1e-3:
        return f"{x * 1e6:.0f}µs"
    if x < 1:
        return f"{x * 1e3:.1f}ms" if x < 0.1 else f"{x * 1e3:.0f}ms"
    if x < 60:
        return f"{x:.2f}s"
    m, s = divmod(int(x), 60)
    h, m = divmod(m, 60)
    return f"{h}h{m:02d}m{s:02d}s" if h else f"{m}m{s:02d}s"


def nbytes(x: float | None, compact: bool = False) -> str:
    """Powers of 1024: '1.5KiB', or '1.5K' compact (tables, like htop and free)."""
    if x is None:
        return NA
    v = float(x)
    for unit in ("B", "K", "M", "G", "T"):
        if abs(v) < 1024 or unit == "T":
            if unit == "B":
                return f"{v:.0f}B"
            suffix = unit if compact else f"{unit}iB"
            return f"{v:.0f}{suffix}" if compact and abs(v) >= 100 else f"{v:.1f}{suffix}"
        v /= 1024
    return NA  # pragma: no cover


def rate(x: float | None, compact: bool = False) -> str:
    return NA if x is None else f"{nbytes(x, compact)}/s"


def percent(x: float | None, digits: int = 0) -> str:
    return NA if x is None else f"{x:.{digits}f}%"


def fraction(x: float | None) -> str:
    return NA if x is None else f"{100 * x:.0f}%"


def number(x: float | None, digits: int = 1) -> str:
    return NA if x is None else f"{x:.{digits}f}"


def rounded(x: float | None, nd: int = 6) -> float | None:
    """A figure of the JSON report, rounded to ``nd`` digits; None stays None."""
    return None if x is None else round(x, nd)


def table(headers: list[str], rows: list[list[str]], indent: str = "  ") -> Block:
    """A plain aligned table: first column left, the rest right; each cell one line
    (a job's names are cells)."""
    rows = [[visible_line(c) for c in r] for r in rows]
    widths = [
        max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)
    ]

    def line(cells: list[str]) -> str:
        out = [cells[0].ljust(widths[0])]
        out += [c.rjust(w) for c, w in zip(cells[1:], widths[1:])]
        return indent + "  ".join(out).rstrip()

    return Block("\n".join([line(headers), *(line(r) for r in rows)]))


def command(argv: tuple[str, ...] | list[str]) -> str:
    """A command line as a user would type it: the program by its name, not its path."""
    import os
    import shlex

    if not argv:
        return "(no command)"
    return shlex.join([os.path.basename(argv[0]), *argv[1:]])


def clip(text: str, width: int) -> str:
    """``text`` cut to ``width`` characters with "…" where it was cut: a command cut bare
    at ``--steps 40`` reads as the command it is not (``--steps 400``)."""
    return text if len(text) <= width else text[: max(0, width - 1)] + "…"


def count(n: int, word: str) -> str:
    """``n`` and ``word``, plural unless one: "1 step", "2,048 steps"."""
    return f"{n:,} {word}" if n == 1 else f"{n:,} {word}s"


def loader_label(loader_id: int | None) -> str:
    """A DataLoader as the Processes panel and the report name it: its number in the
    order the training process first iterated its loaders (L0, L1, ...)."""
    return "-" if loader_id is None else f"L{loader_id}"


def loader_suffix(loader_id: int | None) -> str:
    """What a worker's index gets for its loader where that is not the first (``·L1``)."""
    return f"·{loader_label(loader_id)}" if loader_id else ""


def process_label(name: str, cmdline: str, width: int = 40) -> str:
    """What a process is, by its command: a Python process by its script or module
    (``log_monitor.py``, ``-m torch.distributed.run``; ``-c`` code that starts from a
    module's import by that module, as multiprocessing's children do:
    ``-c multiprocessing.forkserver``, ``-c multiprocessing.spawn``), one that set its
    title by that title (Ray's ``ray::RayTrainWorker.train``, ``raylet``), any other by
    its name; cut to ``width`` with "…"."""
    return clip(_label(name, cmdline), width)


def _label(name: str, cmdline: str) -> str:
    argv = cmdline.split()
    if not argv:
        return name
    prog = argv[0].replace("\\", "/").rsplit("/", 1)[-1]
    if not prog.startswith("python") or "::" in argv[0]:  # a program, or a title set
        return argv[0] if "::" in argv[0] else (prog or name)
    rest = iter(argv[1:])
    for a in rest:
        if a == "-m":
            return f"-m {next(rest, '')}"
        if a == "-c":
            what = next(rest, "")
            mod = next(rest, "").rstrip(";,") if what in ("from", "import") else ""
            return f"-c {mod}" if "." in mod else f"{prog} -c"
        if a.startswith("-"):
            continue
        return a.replace("\\", "/").rsplit("/", 1)[-1]
    return prog


def cpu_list(cpus: Iterable[int]) -> str:
    """The kernel's list format, ranges joined: {0, 1, 2, 3, 8} -> "0-3,8"."""
    out: list[str] = []
    run: list[int] = []
    for c in sorted(cpus):
        if run and c == run[-1] + 1:
            run.append(c)
            continue
        if run:
            out.append(_span(run))
        run = [c]
    if run:
        out.append(_span(run))
    return ",".join(out)


def _span(run: list[int]) -> str:
    return str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}"
