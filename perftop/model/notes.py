"""Notes said alike by several processes, said once: each rank of a job (or each worker)
notes the same thing about itself, and eight identical lines read as eight problems."""

from __future__ import annotations

from collections.abc import Iterable

SOURCES_SHOWN = 3  # the sources named before "and N more"


def grouped(notes: Iterable[tuple[str, str, str]]) -> list[tuple[str, str, tuple[str, ...]]]:
    """``(level, text, sources)`` for each distinct ``(level, source, text)`` note's level
    and text, in the order first said, its sources in the order they said it (each once)."""
    order: dict[tuple[str, str], list[str]] = {}
    for level, source, text in notes:
        said = order.setdefault((level, text), [])
        if source not in said:
            said.append(source)
    return [(level, text, tuple(sources)) for (level, text), sources in order.items()]


def sources_text(sources: tuple[str, ...]) -> str:
    """``hook:17, hook:18 and 6 more``: who said a note, at most a few of them by name."""
    named = ", ".join(sources[:SOURCES_SHOWN])
    rest = len(sources) - SOURCES_SHOWN
    return f"{named} and {rest} more" if rest > 0 else named
