"""Host: per-core CPU, iowait, memory, disk and network throughput of the machine."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.text import Text

from perftop.fmt import cpu_list
from perftop.model import Snapshot
from perftop.model.cores import JobCores, allowed_cores
from perftop.model.snapshot import HostRow
from perftop.tui import fmt
from perftop.tui.widgets.panel import TextPanel, with_probe_status


def cores_grid(per_core: tuple[float, ...], width: int, rows: int) -> list[Text]:
    """htop-style ``NN[|||  45%]`` bars in columns when there is room, otherwise one cell
    per core so 128 cores still fit a line or two."""
    n = len(per_core)
    if n == 0:
        return [Text("per-core N/A", style=fmt.NA_STYLE)]
    cell_w = 16
    cols = max(1, width // cell_w)
    if rows > 0 and cols * rows >= n:
        per_col = -(-n // cols)
        lines = []
        for r in range(per_col):
            t = Text()
            for c in range(cols):
                i = c * per_col + r
                if i >= n:
                    break
                t.append(f"{i:>3}", style="dim")
                v = per_core[i]
                t.append_text(fmt.bar(v / 100, cell_w - 9))
                t.append(f"{fmt.pct(v):>5} ")
            lines.append(t)
        return lines
    lines, t = [], Text()
    prefix = "cores "
    t.append(prefix, style="dim")
    for v in per_core:
        if len(t) >= width:
            lines.append(t)
            t = Text(" " * len(prefix))
        t.append_text(fmt.vblock(v / 100))
    lines.append(t)
    return lines


def summary_lines(h: HostRow, job: JobCores | None = None) -> tuple[Text, Text, Text]:
    """The CPU, memory and IO lines; ``job``: what the job may use, said where it is less
    than the host (its affinity's CPUs, its cgroup's CPU limit)."""
    cpu = Text("CPU ", style="dim")
    frac = None if h.cpu_percent is None else h.cpu_percent / 100
    cpu.append(fmt.pct(h.cpu_percent), style=fmt.level_style(frac))
    cpu.append(f" of {h.cpu_count}" if h.cpu_count else "", style="dim")
    cpu.append("  iowait ", style="dim")
    io = h.iowait_percent
    cpu.append(fmt.pct(io), style=fmt.level_style(None if io is None else io / 100, 0.05, 0.2))
    if h.load is not None:
        cpu.append("  load ", style="dim")
        cpu.append(" ".join(f"{x:.1f}" for x in h.load))
    if job is not None and job.quota is not None:
        cpu.append("  job limit ", style="dim")
        cpu.append(f"{job.quota:g} cores")
    elif job is not None and job.cpus is not None:
        cpu.append("  job on CPUs ", style="dim")
        cpu.append(cpu_list(job.cpus))
        cpu.append(f" {fmt.pct(job.busy_percent)}")
    mem = Text("mem ", style="dim")
    mem.append(f"{fmt.bytes_(h.mem_used_bytes)}/{fmt.bytes_(h.mem_total_bytes)}")
    if h.swap_used_bytes:
        mem.append("  swap ", style="dim")
        mem.append(fmt.bytes_(h.swap_used_bytes), style="yellow")
    if h.shm_used_bytes is not None:
        mem.append("  shm ", style="dim")
        mem.append(fmt.bytes_(h.shm_used_bytes))
    io_t = Text("disk ", style="dim")
    io_t.append(f"r {fmt.rate(h.disk_read_bps)} w {fmt.rate(h.disk_write_bps)}")
    io_t.append("  net ", style="dim")
    io_t.append(f"↓{fmt.rate(h.net_rx_bps)} ↑{fmt.rate(h.net_tx_bps)}")
    return cpu, mem, io_t


def fold(t: Text, width: int) -> list[Text]:
    """``t`` on as many lines as ``width`` needs, broken between its figures (at the
    double spaces) rather than cut: "load 2.6 2.4 2.1" and "net ↓… ↑…" stay whole."""
    plain = t.plain
    if width <= 0 or len(plain) <= width:
        return [t]
    cuts = [i for i in range(1, len(plain)) if plain.startswith("  ", i) and plain[i - 1] != " "]
    lines, start, last = [], 0, None
    for c in [*cuts, len(plain)]:
        if c - start > width and last is not None and last > start:
            lines.append(t[start:last])
            start = last + 2  # the next line starts at the figure, not at the spaces
        last = c
    lines.append(t[start:])
    return lines


class HostPanel(TextPanel):
    TITLE = "Host"

    def body_key(self, snap: Snapshot) -> object:
        # a probe tick's, once a second
        return (snap.host, snap.probe_stopped("host"), allowed_cores(snap))

    def render_body(self, snap: Snapshot) -> RenderableType:
        return with_probe_status(snap, "host", self._figures(snap))

    def _figures(self, snap: Snapshot) -> RenderableType:
        h = snap.host
        if h.t is None:
            return Text("waiting for the first host sample…", style="dim")
        cpu, mem, io = summary_lines(h, allowed_cores(snap))
        w = self.body_width
        cpu_l, io_l = fold(cpu, w), fold(io, w)
        height = max(1, self.content_region.height or 4)
        if self.compact and not self.zoomed:
            cores = cores_grid(h.per_core, w, 0)[:1]
            return Group(*[*cpu_l, mem, *io_l, *cores][:height])
        mem_frac = (
            None
            if h.mem_used_bytes is None or not h.mem_total_bytes
            else h.mem_used_bytes / h.mem_total_bytes
        )
        membar = Text("mem ", style="dim")
        total = f"{fmt.bytes_(h.mem_used_bytes)}/{fmt.bytes_(h.mem_total_bytes)}"
        membar.append_text(fmt.bar(mem_frac, max(8, w - 6 - len(total))))
        membar.append(f" {total}")
        used = f"mem {fmt.bytes_(h.mem_used_bytes)}/{fmt.bytes_(h.mem_total_bytes)}"
        extra = mem[len(used) :]  # swap and /dev/shm, when known
        room = max(0, height - 2 - len(cpu_l) - len(io_l))
        lines = [*cpu_l, *cores_grid(h.per_core, w, room), membar]
        if extra.plain.strip():
            lines.append(Text("   ") + extra[2:])
        return Group(*lines, *io_l)
