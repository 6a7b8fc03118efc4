"""What a workload's own timer may count that perftop cannot see: the time its thread
waited for a core (a loaded CI host preempts a job for milliseconds between its timer and
the call perftop sees). Tests widen a tolerance by it, never more."""


def run_delay():
    """Seconds this thread waited for a core so far (schedstat's second field); 0 where it
    cannot be read."""
    try:
        with open("/proc/thread-self/schedstat", "rb") as f:
            return int(f.read().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return 0.0
