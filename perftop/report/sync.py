"""Host-device sync sites in the report: their JSON, and the text rendered from it. A
section of its own, kept whole here, as the collectives' are in :mod:`perftop.report.comm`."""

from __future__ import annotations

from typing import Any

from perftop.fmt import count, rounded, seconds, table
from perftop.fmt_sync import sync_rate, sync_where
from perftop.model import Snapshot
from perftop.model.finding_rows import passes_run


def sync_json(snap: Snapshot, between: bool = False) -> list[dict[str, Any]]:
    """One entry per site, most costly first; ``per_step`` over the steps watched
    (weighed by the chance each had of being watched), ``watched_steps`` it rests on,
    ``per_step_error`` its standard error (0 in the exact mode; for a per-step site, at
    least what its drawn steps can tell; null: not sampled), ``seen_steps`` the watched
    steps the site was seen in, ``every_step`` whether that is every one (drawn ones
    included: a per-step site, ``per_step`` its count a step), ``exact`` whether every
    step was watched (``PERFTOP_SYNC=all``);
    ``blocked_s`` per watched step, measured on an accelerator only (else null). With
    ``between``: the syncs made outside training steps, ``per_pass`` (and ``passes``)
    instead of ``per_step``, ``blocked_s`` per pass. ``callers``: a library site's user lines
    (``file``, ``line``, ``function``, ``count``), the most frequent first (``file`` and
    ``line`` are that one's); its rate is theirs summed."""
    rows = snap.sync_between if between else snap.sync
    return [
        {
            "op": s.op,
            "file": s.file,
            "line": s.line,
            "function": s.function,
            "kind": s.kind,
            "count": s.count,
            **(
                {"per_pass": rounded(s.per_pass, 4), "passes": s.passes}
                if between
                else {"per_step": rounded(s.per_step, 4)}
            ),
            **(
                {}
                if between
                else {
                    "watched_steps": s.watched,
                    "per_step_error": rounded(s.error, 4),
                    "seen_steps": s.seen,
                    "every_step": s.every_step,
                    "exact": s.exact,
                }
            ),
            "blocked_s": rounded(s.blocked_s),
            "last_step": s.last_step,
            "host": s.host,
            "lib_file": s.lib_file,
            "lib_line": s.lib_line,
            "lib_function": s.lib_function,
            "package": s.package,
            "callers": [
                {"file": f, "line": n, "function": fn, "count": c} for f, n, fn, c in s.callers
            ],
        }
        for s in rows
    ]


def no_sync_lines(watch: dict[str, Any]) -> list[str]:
    """No site listed where the detector stopped looking: said, with its steps watched
    (no section at all would read as an all-clear)."""
    if not watch.get("paused"):
        return []
    n = watch.get("watched_steps") or 0
    seen = f"none seen in {count(n, 'watched step')}" if n else "no step watched"
    return [
        "",
        "Host-device sync sites",
        f"  {seen}; detection paused: {watch['paused']} (later sites are not looked for)",
    ]


def no_between_lines(r: dict[str, Any]) -> list[str]:
    """No sync listed between steps where passes ran there (evaluations, rollouts): how
    many were watched whole, so an empty section is not read as an all-clear (a watch has
    a budget, and a long pass, a rollout of a thousand environment steps, never fits)."""
    watch = r.get("sync_watch") or {}
    if r.get("sync_between") or "passes_watched" not in watch or not watch["watched_steps"]:
        return []  # listed, an older report, or the detector watched nothing
    n = watch.get("passes_run")  # every process's (an older report: the primary's)
    if n is None:
        n = passes_run((k, b["count"]) for k, b in (r["steps"].get("between_s") or {}).items())
    if not n:
        return []
    k = watch["passes_watched"]
    seen = (
        f"none seen in the {k} pass{'es' if k > 1 else ''} watched whole of {n}"
        if k
        else f"no pass of the {n} watched whole: a watch has a budget (0.25 s and 0.2% of "
        "the training's time), and a longer pass is not watched (PERFTOP_SYNC=all watches "
        "every one)"
    )
    return ["", "Host-device syncs between training steps", f"  {seen}"]


def sync_lines(sites: list[dict[str, Any]], between: bool = False) -> list[str]:
    """Lines of code that make (sync) or would make on a GPU (potential) the host wait,
    as ``user line → library line``. The blocked column only where a site has a
    measurement (a run on an accelerator). ``between``: those made outside training
    steps (evaluation or sampling passes), per pass."""
    if not sites:
        return []
    blocked = any(e.get("blocked_s") is not None for e in sites)
    rate = "per_pass" if between else "per_step"
    rows = []
    for e in sites:
        callers = [(c["file"], c["line"]) for c in e.get("callers") or ()]
        where, via = sync_where(
            e["file"], e["line"], e.get("lib_file"), e.get("lib_line"), e.get("package"), callers
        )
        if via:
            where += f" → {via} {e.get('lib_function') or ''}".rstrip()
        shown = (
            f"{e[rate]:.2f}"
            if between
            else sync_rate(
                e[rate],
                e.get("per_step_error"),
                e.get("seen_steps"),
                every=bool(e.get("every_step")),
                watched=e.get("watched_steps"),
            )
        )
        row = [where, e["op"], e["kind"], e["function"], shown, str(e["count"])]
        rows.append([*row, seconds(e.get("blocked_s"))] if blocked else row)
    head = ["where", "op", "kind", "function", "per pass" if between else "per step", "count"]
    if between:
        passes = max((e.get("passes") or 0) for e in sites)
        held = f"{passes} pass" if passes == 1 else f"{passes} passes"
        title = f"Host-device syncs between training steps ({held} watched)"
    else:
        title = "Host-device sync sites (potential: would stall on a GPU)"
        watched = max((e.get("watched_steps") or 0) for e in sites)
        if any(e.get("exact") for e in sites):
            # from step 1: step 0 is whole only once it ends (docs/steps.md#sampling)
            title += f"; exact: {watched} steps watched, every one but the first"
        elif watched:
            title += f"; per step over {watched} watched steps, ± one standard error"
    return [
        "",
        title,
        table([*head, "blocked/pass" if between else "blocked/step"] if blocked else head, rows),
    ]
