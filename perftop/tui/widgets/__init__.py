"""One widget per panel; each renders a :class:`~perftop.model.Snapshot` via ``show``."""

from perftop.tui.widgets.gpu import GpuPanel
from perftop.tui.widgets.header import HeaderBar
from perftop.tui.widgets.hints import HintsPanel
from perftop.tui.widgets.host import HostPanel
from perftop.tui.widgets.ops import OpsPanel
from perftop.tui.widgets.output import OutputPanel
from perftop.tui.widgets.panel import Panel
from perftop.tui.widgets.processes import ProcessesPanel
from perftop.tui.widgets.ranks import RanksPanel
from perftop.tui.widgets.stacks import StacksPanel
from perftop.tui.widgets.steps import StepsPanel
from perftop.tui.widgets.sync import SyncPanel

__all__ = [
    "GpuPanel",
    "HeaderBar",
    "HintsPanel",
    "HostPanel",
    "OpsPanel",
    "OutputPanel",
    "Panel",
    "ProcessesPanel",
    "RanksPanel",
    "StacksPanel",
    "StepsPanel",
    "SyncPanel",
]
