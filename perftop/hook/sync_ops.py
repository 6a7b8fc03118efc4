"""Which torch calls may make the host wait: the sync detector's reading of one call (its
op's name, a boolean mask, a copy's direction and its source memory). Apart from the mode
(``sync_detect``), which asks once per torch function and keeps the answer: what a call
is, not when or how it is watched.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

_SIMPLE = {
    "item": "item",
    "_local_scalar_dense": "item",
    "tolist": "tolist",
    "numpy": "numpy",
    "cpu": "cpu",
    "nonzero": "nonzero",
    "argwhere": "argwhere",
    "unique": "unique",
    "unique_consecutive": "unique_consecutive",
    "masked_select": "masked_select",
    "__int__": "int",
    "__float__": "float",
    "__bool__": "bool",
    "__index__": "index",
    "__complex__": "complex",
    "__format__": "format",
    "__repr__": "repr",
}


def classifiers(
    torch: Any, detector: Any
) -> tuple[Callable[[Any], Callable[..., str | None] | None], Callable[[tuple[Any, ...]], bool]]:
    """``classify(func)``: the check of a torch function's calls, which names the op a call
    makes the host wait in (None: never a sync); and ``on_device(args)``. Both read
    ``detector.not_devices`` at each call."""
    Tensor = torch.Tensor
    masks = (torch.bool, torch.uint8)

    def is_mask(i: Any) -> bool:
        if isinstance(i, Tensor):
            return i.dtype in masks
        if isinstance(i, tuple | list):
            return any(isinstance(j, Tensor) and j.dtype in masks for j in i)
        return False

    def getitem(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str | None:
        return "boolean_mask" if len(args) > 1 and is_mask(args[1]) else None

    def repeat_interleave(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str | None:
        if kwargs.get("output_size") is not None or (len(args) > 3 and args[3] is not None):
            return None
        reps = args[1] if len(args) > 1 else kwargs.get("repeats", args[0] if args else None)
        return "repeat_interleave" if isinstance(reps, Tensor) else None

    def where(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str | None:
        return "where" if len(args) + len(kwargs) == 1 else None

    def to(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str | None:
        src = args[0] if args else None
        dev, nb = kwargs.get("device"), kwargs.get("non_blocking", False)
        for a in args[1:]:
            if isinstance(a, str | torch.device):
                dev = a
            elif isinstance(a, Tensor):
                dev = a.device
            elif isinstance(a, bool):
                nb = a
        if dev is None or not isinstance(src, Tensor):
            return None
        dest = torch.device(dev).type
        if dest == "cpu":  # a read of device data only from an accelerator's tensor
            return None if src.device.type in detector.not_devices else "cpu"
        return _pageable(src, dest, nb)

    def cuda(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str | None:
        nb = kwargs.get("non_blocking", len(args) > 2 and args[2])
        return _pageable(args[0], "cuda", nb) if args else None

    def copy_(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str | None:
        if len(args) < 2 or not isinstance(args[1], Tensor):
            return None
        nb = kwargs.get("non_blocking", len(args) > 2 and args[2])
        dest, src = args[0].device.type, args[1]
        if dest == "cpu" and src.device.type not in detector.not_devices:
            return "copy_"  # device to host
        return _pageable(src, dest, nb)

    def on_device(args: tuple[Any, ...]) -> bool:
        """Whether the call reads or writes an accelerator's tensor (its time is a wait)."""
        for a in args[:2]:
            if isinstance(a, Tensor) and a.device.type not in detector.not_devices:
                return True
        return False

    def _pageable(src: Any, dest_type: str, non_blocking: Any) -> str | None:
        if not non_blocking or dest_type in detector.not_devices or src.device.type != "cpu":
            return None
        try:
            pinned = src.is_pinned()
        except Exception:
            return None
        return None if pinned else "!pageable_copy"

    special: dict[str, Callable[..., str | None]] = {
        "__getitem__": getitem,
        "repeat_interleave": repeat_interleave,
        "where": where,
        "to": to,
        "cuda": cuda,
        "copy_": copy_,
    }

    def classify(func: Any) -> Callable[..., str | None] | None:
        name = getattr(func, "__name__", "")
        if name in ("_return_output", "_return_inverse", "_return_counts", "_unique_impl"):
            name = "unique"
        if name in _SIMPLE:
            op = _SIMPLE[name]
            return lambda args, kwargs: op
        return special.get(name)

    return classify, on_device
