"""The one base of perftop's modal screens: dismissed once, whatever arrives after.

Two keys in one burst (a paste, a key held down, a TUI that lags behind a chatty job) reach
a screen before its first dismissal has taken effect; a second ``dismiss`` would pop the
screen under it (Textual: ``ScreenStackError: Can't pop screen``) or run the result
callback twice. Here the second one does nothing.
"""

from __future__ import annotations

from typing import TypeVar

from textual.await_complete import AwaitComplete
from textual.screen import ModalScreen

ResultT = TypeVar("ResultT")


class OnceModal(ModalScreen[ResultT]):
    _dismissed = False

    def dismiss(self, result: ResultT | None = None) -> AwaitComplete:
        if self._dismissed or not self.is_active:
            return AwaitComplete.nothing()
        self._dismissed = True
        return super().dismiss(result)
