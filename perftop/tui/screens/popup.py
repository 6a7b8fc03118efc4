"""perftop's modal screens' bases: :class:`OnceModal`, dismissed once, and
:class:`ScrollPopup`, a box that fits the screen or scrolls saying so (the help, a hint's
evidence).

OnceModal: two keys in one burst (a paste, a key held down, a TUI that lags behind a chatty
job) reach a screen before its first dismissal has taken effect; a second ``dismiss`` would
pop the screen under it (Textual: ``ScreenStackError: Can't pop screen``) or run the result
callback twice. Here the second one does nothing.

ScrollPopup: its content scrolls with the scroll keys (↑ ↓ pgup pgdn home end, the wheel);
any other key or a click closes it, and the key it closed with is its result. When the
content is taller than the box, the box's bottom edge says how to see the rest.
"""

from __future__ import annotations

from typing import TypeVar

from textual import events
from textual.app import ComposeResult
from textual.await_complete import AwaitComplete
from textual.containers import VerticalScroll
from textual.screen import ModalScreen

ResultT = TypeVar("ResultT")


class OnceModal(ModalScreen[ResultT]):
    _dismissed = False

    def dismiss(self, result: ResultT | None = None) -> AwaitComplete:
        if self._dismissed or not self.is_active:
            return AwaitComplete.nothing()
        self._dismissed = True
        return super().dismiss(result)


SCROLL_KEYS = {
    "up": "scroll_up",
    "down": "scroll_down",
    "pageup": "scroll_page_up",
    "pagedown": "scroll_page_down",
    "home": "scroll_home",
    "end": "scroll_end",
}
MORE = " more below: ↓ pgdn · any other key closes "
MORE_ABOVE = " ↑ pgup: back up · any other key closes "


class ScrollPopup(OnceModal[str | None]):
    """Subclasses give ``TITLE`` and :meth:`body`; dismissed with the closing key."""

    TITLE = ""
    DEFAULT_CSS = """
    ScrollPopup { align: center middle; }
    ScrollPopup > VerticalScroll {
        width: 84; max-width: 96%; height: auto; max-height: 96%;
        border: round $accent; background: $surface; padding: 0 1;
    }
    """

    def body(self) -> ComposeResult:
        yield from ()

    def compose(self) -> ComposeResult:
        with VerticalScroll() as v:
            v.border_title = self.TITLE
            v.can_focus = False  # the keys are the screen's: see on_key
            yield from self.body()

    @property
    def box(self) -> VerticalScroll:
        return self.query_one(VerticalScroll)

    def on_mount(self) -> None:
        self.watch(self.box, "scroll_y", lambda _: self._say_more(), init=False)
        self.call_after_refresh(self._say_more)

    def on_resize(self, event: events.Resize) -> None:
        self.call_after_refresh(self._say_more)

    def _say_more(self) -> None:
        box = self.box
        if box.max_scroll_y <= 0:
            box.border_subtitle = ""
        elif box.scroll_target_y < box.max_scroll_y:
            box.border_subtitle = MORE
        else:
            box.border_subtitle = MORE_ABOVE

    def on_key(self, event: events.Key) -> None:
        event.stop()
        action = SCROLL_KEYS.get(event.key)
        if action is not None:
            getattr(self.box, action)(animate=False)
            self.call_after_refresh(self._say_more)
            return
        self.dismiss(event.key)

    def on_click(self) -> None:
        self.dismiss(None)
