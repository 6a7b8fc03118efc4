"""perftop: htop for PyTorch training.

In a training script, ``perftop.step()`` and ``perftop.phase(name)`` mark steps and named
phases in loops perftop cannot find by itself; both are no-ops without a monitor. This
module stays light: it is imported inside training processes.
"""

from perftop.hook.api import phase, step

__version__ = "0.1.0"
__all__ = ["__version__", "phase", "step"]
