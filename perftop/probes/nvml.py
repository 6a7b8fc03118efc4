"""nvidia-ml-py behind guards: no NVML, no driver or no GPU is a normal state, and a call
that fails gives None for its figure with one note per kind of failure, never a crash.

The library is passed in (``pynvml`` by default) so tests can hand over a fake with the
same functions and the same ``NVMLError`` classes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

NoteSink = Callable[[str, str], None]  # (level, text)

# Failures of a single call that mean "this device cannot say": N/A, noted once per call.
WHY = {
    3: "not supported on this device",
    4: "no permission",
    13: "not in this driver",
    15: "GPU is lost",
}
NOT_FOUND = 6  # e.g. no process-utilization samples in the window: no data, not a failure
GPU_IS_LOST = 15


def load(lib: Any = None) -> tuple[Any | None, str]:
    """The NVML module and "" once initialized, or None and why the GPU list is empty."""
    if lib is None:
        try:
            import pynvml  # monitor side only, and optional
        except ImportError:
            return None, "nvidia-ml-py is not installed: no GPU figures"
        lib = pynvml
    try:
        lib.nvmlInit()
    except lib.NVMLError as exc:
        code = getattr(exc, "value", None)
        if code == 12:
            return None, "NVML library not found (no NVIDIA driver installed)"
        if code == 9:
            return None, "NVIDIA driver not loaded"
        return None, f"NVML could not start: {_text(exc)}"
    except OSError as exc:
        return None, f"NVML could not start: {exc}"
    try:
        count = lib.nvmlDeviceGetCount()
    except lib.NVMLError as exc:
        return None, f"NVML could not count GPUs: {_text(exc)}"
    if not count:
        return None, "no NVIDIA GPU"
    return lib, ""


class Nvml:
    """Calls into an initialized NVML; each failure kind is reported once through ``note``."""

    def __init__(self, lib: Any, note: NoteSink) -> None:
        self.lib = lib
        self.note = note
        self._noted: set[tuple[str, int | None, int | None]] = set()
        self.lost: set[int] = set()

    def call(self, fn: str, *args: Any, device: int | None = None) -> Any | None:
        """``lib.fn(*args)``, or None when NVML cannot answer."""
        if device is not None and device in self.lost:
            return None
        f = getattr(self.lib, fn, None)
        if f is None:
            return self._fail(fn, 13, "not in this nvidia-ml-py", device)
        try:
            return f(*args)
        except self.lib.NVMLError as exc:
            code = getattr(exc, "value", None)
            if code == NOT_FOUND:
                return None
            return self._fail(
                fn, code, (WHY.get(code) if code is not None else None) or _text(exc), device
            )
        except Exception as exc:  # a broken binding must not stop the monitor
            return self._fail(fn, None, f"{type(exc).__name__}: {exc}", device)

    def _fail(self, fn: str, code: int | None, why: str, device: int | None) -> Any | None:
        """Note the failure once; None, the value of a call NVML could not answer."""
        if code == GPU_IS_LOST and device is not None:
            self.lost.add(device)
        key = (fn, code, device if code == GPU_IS_LOST else None)  # a lost GPU: each one
        if key not in self._noted:
            self._noted.add(key)
            where = f"GPU {device}: " if device is not None else ""
            self.note("warning", f"{where}{fn} failed ({why}); shown as N/A")
        return None

    def shutdown(self) -> None:
        try:
            self.lib.nvmlShutdown()
        except Exception:
            pass


def _text(exc: BaseException) -> str:
    try:
        return str(exc)
    except Exception:  # pynvml's __str__ itself calls into the library
        return type(exc).__name__
