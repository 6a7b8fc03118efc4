"""Which calls send a tensor to a device: a call that names one (``.to(device)``,
``.cuda()``, ``device=`` given), unless the device was read off another tensor
(``x.device``: a tensor made there follows ``x``) or, for a factory, torch's own code
named it (:func:`by_job`). A base of :class:`perftop.hook.sync_marks.Marks`, apart from
its marks: what a call's device arguments say, looked up once per device name.
"""

from __future__ import annotations

from typing import Any

from perftop.hook.frames import direct_caller

MAX_FOLLOWED = 256
SENDS = frozenset({"to", "cuda"})  # calls that may name a device without a device= keyword


class Sends:
    """Reads the device a call names; its attributes are set in ``Marks.__init__``."""

    device_cls: Any
    followed: dict[int, tuple[Any, bool]]
    named: dict[Any, bool]

    def sent(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
        """A call that names a device: ``.to(device)``, ``.cuda()``, ``device=`` given.
        A few hundred ns (``Tensor.to`` asks on every call): names are looked up once."""
        if name == "cuda":
            return True
        dev = kwargs.get("device") if kwargs else None
        device_cls = self.device_cls
        if dev is None and name == "to":
            for a in args[1:]:
                if type(a) is str or isinstance(a, device_cls):
                    dev = a
        if dev is None:
            return False
        if type(dev) is not str:
            got = self.followed.get(id(dev))
            if got is not None and got[0] is dev:  # another tensor's ``.device``: as that one
                return got[1]
        named = self.named
        try:
            known = named.get(dev)
        except TypeError:  # unhashable: not a device
            return False
        if known is None:
            known = self._names_a_device(dev)
            if len(named) < MAX_FOLLOWED:
                named[dev] = known
        return known

    def _names_a_device(self, dev: Any) -> bool:
        if isinstance(dev, self.device_cls):
            return bool(dev.type != "meta")
        try:
            return bool(self.device_cls(dev).type != "meta")
        except Exception:
            return False

    def follow(self, device: Any, bound: bool) -> None:
        """``device`` was read from a tensor (``x.device``), bound or not: a tensor made
        or sent there follows ``x``, not the job's choice of device. Kept for the last
        reads only (each read makes a new object; the entry holds it, so its id stays)."""
        followed = self.followed
        if len(followed) >= MAX_FOLLOWED:
            followed.clear()
        followed[id(device)] = (device, bound)


def by_job(frame: Any) -> bool:
    """Whether the job named the device of a factory called from ``frame`` (user or
    library code), not torch's own code: torch's internals make a tensor on the device of
    what they were given, such as ``torch.empty(device=storage.device)`` when a batch from
    a DataLoader worker is rebuilt on its shared memory (a host batch in any run). Sends
    (``.to``, ``.cuda``) by torch's code carry the job's device (``Module.to``)."""
    return direct_caller(frame) is not None
