"""How a host-device sync site and its rate read, in the TUI, the report and the hints: its
place (the user's line, and the library line it went through) and its syncs per step as
the sampling allows (a rate with its error, or only what was seen)."""

from __future__ import annotations

from collections.abc import Sequence


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
