"""Modal screens: the help overlay and the quit confirmation."""

from perftop.tui.screens.help import HelpScreen
from perftop.tui.screens.quit import QuitScreen

__all__ = ["HelpScreen", "QuitScreen"]
