"""GPU: per device utilization and memory bars, power, temperature, clocks, PCIe and the
job's per-process memory. No GPU or no NVML is said plainly, not shown as zeros."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.text import Text

from perftop.model import Snapshot
from perftop.model.snapshot import GpuRow
from perftop.safe import visible_line
from perftop.tui import fmt
from perftop.tui.widgets.panel import TextPanel, with_probe_status


def _frac(used: float | None, total: float | None) -> float | None:
    if used is None or not total:
        return None
    return used / total


def device_lines(g: GpuRow, width: int, compact: bool, snap: Snapshot) -> list[Text]:
    """Four lines per device (name and power, util bar, memory bar, PCIe and processes),
    or one summary line when ``compact``."""
    util = None if g.util_percent is None else g.util_percent / 100
    mem = _frac(g.mem_used_bytes, g.mem_total_bytes)
    label = Text(f"{g.host}:{g.index} " if g.host else f"{g.index} ", style="bold")
    if compact:
        t = label.copy()
        t.append("util ", style="dim")
        t.append(f"{fmt.pct(g.util_percent):>4}", style=fmt.level_style(util))
        t.append("  mem ", style="dim")
        t.append(f"{fmt.bytes_(g.mem_used_bytes)}/{fmt.bytes_(g.mem_total_bytes)}")
        t.append("  ")
        t.append(fmt.num(g.temperature_c, "{:.0f}°C"), style=_temp_style(g.temperature_c))
        return [t]
    bar_w = max(8, width - 14)
    head = label.copy()
    if g.power_w is None:
        head.append("N/A W  ", style=fmt.NA_STYLE)
    else:
        limit = "" if g.power_limit_w is None else f"/{g.power_limit_w:.0f}"
        head.append(f"{g.power_w:.0f}{limit}W  ")
    head.append(fmt.num(g.temperature_c, "{:.0f}°C"), style=_temp_style(g.temperature_c))
    head.append(f"  {fmt.num(g.sm_clock_mhz, '{:.0f}MHz')}  ")
    head.append(visible_line(g.name.replace("NVIDIA ", "")), style="dim")
    u = Text("  util ", style="dim")
    u.append_text(fmt.bar(util, bar_w))
    u.append(f"{fmt.pct(g.util_percent):>5}")
    m = Text("  mem  ", style="dim")
    m.append_text(fmt.bar(mem, bar_w))
    m.append(f"{fmt.bytes_(g.mem_used_bytes):>6}")
    io = Text("  PCIe ", style="dim")
    io.append(f"↓{fmt.rate(g.pcie_rx_bps)} ↑{fmt.rate(g.pcie_tx_bps)}")
    if g.throttle:
        io.append("  throttled: " + ",".join(g.throttle), style="yellow")
    for p in g.processes:
        role = snap.role_of(p.pid, g.host)
        io.append(f"  {p.pid}", style="dim")
        io.append(f"{'/' + role.role if role else ''} {fmt.bytes_(p.mem_bytes)}")
    return [head, u, m, io]


def _temp_style(c: float | None) -> str | None:
    if c is None:
        return fmt.NA_STYLE
    return "red" if c >= 85 else "yellow" if c >= 75 else None


class GpuPanel(TextPanel):
    TITLE = "GPU"

    def render_body(self, snap: Snapshot) -> RenderableType:
        return with_probe_status(snap, "gpu", self._devices(snap))

    def _devices(self, snap: Snapshot) -> RenderableType:
        if not snap.gpus:
            return Text(snap.gpu_note or "no GPU", style="dim")
        w = self.body_width
        h = self.content_region.height or 4
        compact = (self.compact or 4 * len(snap.gpus) > h) and not self.zoomed
        lines: list[Text] = []
        for g in snap.gpus:
            lines.extend(device_lines(g, w, compact, snap))
        if snap.gpu_note:
            lines.append(Text(snap.gpu_note, style="yellow"))
        return Group(*lines)
