"""The key bar at the bottom: Textual's footer, without the memory its recomposes keep.

Textual's :class:`~textual.widgets.Footer` recomposes whenever the active bindings change,
which in perftop is every focus change (``1``-``8``, zoom, a help screen). Each recompose
mounts a fresh key widget per binding and binds it to the footer's ``compact`` reactive;
Textual (8.2) drops a watcher of a removed widget only when the watched value changes,
and ``compact`` never does here. So every focus change kept about twenty dead key widgets
with their render caches: 0.2 MB a press, without bound, measured with
``benchmarks/fleet_load.py``. Before composing its keys again this footer forgets the
watchers of key widgets no longer mounted.
"""

from __future__ import annotations

from typing import Any

from textual.app import ComposeResult
from textual.widgets import Footer

# Where Textual keeps the watchers of a reactable's attributes (textual/reactive.py).
WATCHERS = "__watchers"


class KeysFooter(Footer):
    def compose(self) -> ComposeResult:
        self._forget_removed()
        yield from super().compose()

    def _forget_removed(self) -> None:
        watchers: dict[str, list[tuple[Any, Any]]] = getattr(self, WATCHERS, {})
        for bound in watchers.values():
            bound[:] = [(node, fn) for node, fn in bound if node.is_attached]

    def watcher_count(self) -> int:
        """How many watchers the footer's reactives hold (for the tests)."""
        return sum(len(bound) for bound in getattr(self, WATCHERS, {}).values())
