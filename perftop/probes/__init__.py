"""Probes: what the monitor samples about the job from outside it (processes, host, GPUs).

Monitor side only: psutil and pynvml are imported here, never by the hook or the events.
"""

from perftop.probes.scheduler import MIN_INTERVAL_S, ProbeSource, check_interval, make_sources

__all__ = ["MIN_INTERVAL_S", "ProbeSource", "check_interval", "make_sources"]
