"""Modal screens: the help overlay, the quit confirmation, the stacks view."""

from perftop.tui.screens.help import HelpScreen
from perftop.tui.screens.quit import QuitScreen
from perftop.tui.screens.stacks import StacksScreen

__all__ = ["HelpScreen", "QuitScreen", "StacksScreen"]
