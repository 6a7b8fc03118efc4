"""Number formatting shared by the text report and the TUI: units, and "N/A" for None; and
the JSON report's rounding (:func:`rounded`), shared by its builders."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

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


WHAT_HANGS = {"eval": "evaluation", "checkpoint": "checkpoint", "collective": "a collective"}


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
    its name."""
    argv = cmdline.split()
    if not argv:
        return name[:width]
    prog = argv[0].replace("\\", "/").rsplit("/", 1)[-1]
    if not prog.startswith("python") or "::" in argv[0]:  # a program, or a title set
        label = argv[0] if "::" in argv[0] else (prog or name)
        return label[:width]
    rest = iter(argv[1:])
    for a in rest:
        if a == "-m":
            return f"-m {next(rest, '')}"[:width]
        if a == "-c":
            what = next(rest, "")
            mod = next(rest, "").rstrip(";,") if what in ("from", "import") else ""
            return (f"-c {mod}" if "." in mod else f"{prog} -c")[:width]
        if a.startswith("-"):
            continue
        return a.replace("\\", "/").rsplit("/", 1)[-1][:width]
    return prog[:width]


def sync_where(
    file: str,
    line: int,
    lib_file: str | None,
    lib_line: int | None,
    package: str | None,
    callers: Sequence[tuple[str, int]] = (),
) -> tuple[str, str]:
    """A sync site's place in two parts: the user's line, and the library line it went
    through (``''`` when the user's own line made the call). With no user frame on the
    stack the first part is the library's line, named with its package. A library file is
    named from its package's folder (``ignite/engine/__init__.py``: one file, not
    ``ignite/__init__.py``). A library line reached from several user lines (``callers``,
    the most frequent first) names them all, up to three."""
    name = file.replace("\\", "/").rsplit("/", 1)[-1]
    if lib_file is None:
        return (f"{_in_package(file, package)}:{line}" if package else f"{name}:{line}"), ""
    user = f"{name}:{line}"
    if len(callers) > 1:
        shown = [f"{f.replace(chr(92), '/').rsplit('/', 1)[-1]}:{n}" for f, n in callers[:3]]
        user = ", ".join(shown) + (f" +{len(callers) - 3}" if len(callers) > 3 else "")
    lib = _in_package(lib_file, package) if package else lib_file.replace("\\", "/").rsplit("/")[-1]
    return user, f"{lib}:{lib_line}"


def _in_package(path: str, package: str) -> str:
    """``path`` from its package's folder on: ``…/site-packages/ignite/engine/x.py`` is
    ``ignite/engine/x.py`` (a top-level module, ``six.py``, is its name)."""
    parts = path.replace("\\", "/").split("/")
    for i in range(len(parts) - 2, -1, -1):
        if parts[i] == package:
            return "/".join(parts[i:])
    return f"{package}/{parts[-1]}" if parts[-1] != f"{package}.py" else parts[-1]


FEW = 10  # a sampled site seen in fewer watched steps than this reads "about 1 in N"


def sync_rated(
    per_step: float,
    error: float | None,
    seen: int | None,
    every: bool = False,
    watched: int | None = None,
) -> bool:
    """Whether the sampling tells a site's rate (:func:`sync_rate` gives a number), not
    only what was seen: not where its error is as large as the rate, nor where it was in
    each watched step and too few were drawn to say "every step". A sum over sites is
    rated only where each of them is (hints/sync.py)."""
    if every and per_step > 0:
        return True
    return not (
        error
        and per_step > 0
        and seen is not None
        and watched
        and (error >= per_step or seen >= watched)
    )


def sync_rate(
    per_step: float,
    error: float | None = None,
    seen: int | None = None,
    short: bool = False,
    every: bool = False,
    watched: int | None = None,
) -> str:
    """A site's syncs per step as its sampling allows: ``0.52 ±0.04`` (one standard error;
    none when exact), or ``about 1 in 63 steps`` for a site seen in few watched steps (it
    runs on some steps only, and a few sightings tell its rate only roughly), if its
    error is below the rate (else the rate and its error: 1 in N would say too much). An
    exact rate (error 0: every step watched) is the number. A site seen in every watched
    step (``every``) reads ``every step ×1.00 ±0.15``: its count a step and its error. Where
    the error is as large as the rate, or the site was in each watched step but too few of
    them were drawn to say "every step" (early in a run), no rate is given but what was
    seen: ``in 5 of 5 watched steps`` (``5/5 watched``)."""
    if seen == 0 and watched:  # counted only outside them: after the last step
        return f"0/{watched} watched" if short else f"in 0 of {watched} watched steps"
    if every and per_step > 0:
        text = f"every step ×{per_step:.2f}" if not short else f"every ×{per_step:.1f}"
        return text + (f" ±{error:.2f}" if error else "")
    if not sync_rated(per_step, error, seen, every, watched):
        return f"{seen}/{watched} watched" if short else f"in {seen} of {watched} watched steps"
    if seen is not None and 0 < seen < FEW and 0 < per_step < 1 and 0 < (error or 0) < per_step:
        n = round(1 / per_step)
        return f"~1 in {n}" if short else f"about 1 in {n} steps"
    text = f"{per_step:.2f}" if per_step < 1 or not short else f"{per_step:.1f}"
    if error:
        text += f" ±{error:.2f}" if error < 1 or not short else f" ±{error:.1f}"
    return text


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
