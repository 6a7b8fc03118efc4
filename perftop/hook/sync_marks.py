"""Which CPU tensors would live on the accelerator in a GPU run: a CPU run's stand-in for
``tensor.device``, so that a CPU run reports a potential sync only where a GPU run would
have one.

A tensor is *device-bound* when it is on an accelerator, or (on a CPU run) when it went
through ``.to(device)`` / ``.cuda()`` or a factory given a ``device=``, is a model
parameter or needs grad (computed from parameters), or was computed from a device-bound
tensor. A tensor used as an operand beside a device-bound one must be on the device too
(a GPU run would fail otherwise), except 0-dim CPU scalars and indices: it is marked as
well, so a target moved with ``.to(device)`` before the loop is learnt at its first use.
A tensor from ``torch.randint``, ``arange`` or ``from_numpy`` with no device, and what is
computed from it alone, stays a host tensor: indexing a numpy array or list with it is no
sync on any device. Following another tensor's device is no move to the accelerator: a
tensor made or sent with ``device=x.device`` (torchvision's ``Normalize``) is device-bound
only if ``x`` is (the mode sees the ``.device`` read). A view of device-bound data is
device-bound too where the mode did not see it made: ``as_subclass`` (fastai's
``TensorBase``, which its losses wrap their inputs in) is none of the calls a mode sees, so
a validation loss computed from such views read as host data, its ``.item()`` no sync
(:func:`_fresh` for the views such a subclass makes of a call's output).

On CPU ``x.cpu()`` of device data returns ``x`` itself, where a GPU run makes a host
copy; the object is then kept as the *host* copy (:attr:`Marks.host`): read on the host,
what it computes alone is host data. So ``h = y.cpu()`` is the site and ``bool(h > 0)``
is not. ``x.to(device)`` of host data also returns ``x`` on CPU, and there the object is
marked as device data: nearly every loop trains on what it sent (``x, y = x.to(device),
y.to(device)``; ``torch.unique(y)`` syncs on a GPU), so a host batch kept beside its copy
(ignite's ``engine.state.batch``) and read on the host is reported on CPU although it
would wait for nothing on a GPU. Marks are learnt while the detector's mode is
on (its sampled steps, and the step before each, primed: marks only, so a metric made
there and read in the watched step is known); a data set sent before the loop is not seen
(no ``Tensor`` method is replaced to see it), so a CPU run reports no site on it. Factories given
``device=`` are seen while the mode is on only: wrapping ``torch.zeros`` and its kind
would break ``torch.jit.script``. A device named by torch's own code (:func:`by_job`) is
not the job's choice and marks nothing. Marks are weak references keyed by ``id()``
(checked against the tensor itself, so a dead tensor's id reused is no mark), never
stored on the tensor (that would change what ``torch.save`` writes).
"""

from __future__ import annotations

import sys
from typing import Any
from weakref import ref

from perftop.hook.sync_sends import SENDS, Sends, by_job

NOT_DEVICES = frozenset({"cpu", "meta"})  # copies to these never stall the host
# Calls whose other tensor operands may stay on the host in a GPU run (an index, a copy's
# source, a conversion's template): they are not marked for sitting beside a device tensor.
NO_SPREAD = frozenset(
    {
        "__getitem__",
        "__setitem__",
        "index_put_",
        "index_put",
        "to",
        "copy_",
        "type_as",
        "new_tensor",
        "tensor",
        "as_tensor",
    }  # fmt: skip
)
# Calls whose result is on the host whatever their input: a read of device data.
HOST_OUT = frozenset(
    {
        "cpu",
        "numpy",
        "tolist",
        "item",
        "_local_scalar_dense",
        "__int__",
        "__float__",
        "__bool__",
        "__index__",
        "__complex__",
        "__repr__",
        "__format__",
        "__len__",
    }  # fmt: skip
)
MAX_MARKS = 65_536  # live and dead together; the dead are pruned when it is reached


class Marks(Sends):
    def __init__(self, torch: Any) -> None:
        self.Tensor = torch.Tensor
        self.Parameter = torch.nn.Parameter
        self.device_cls = torch.device
        self.ids: dict[int, Any] = {}  # id(t) -> a weak reference (dead ones pruned)
        self.followed: dict[int, tuple[Any, bool]] = {}  # id(x.device) -> (it, x bound)
        self.named: dict[Any, bool] = {}  # "cuda:0", device("cuda") -> whether a device
        self.virtual = True  # a CPU run: marks stand in for the device (set per sample)
        # id(t) -> a weak reference: a tensor that in a GPU run would be the host copy of
        # another, the same object on CPU (what ``.cpu()`` returned of device data, what a
        # move in a watched step returned of host data): read on the host, never marked
        self.host: dict[int, Any] = {}

    def has(self, t: Any) -> bool:
        """Whether ``t`` itself is marked (not a dead tensor that had its id)."""
        r = self.ids.get(id(t))
        return r is not None and r() is t

    def prune(self) -> None:
        """Drop the marks of dead tensors (before each watch, and when full). A weak
        reference with no callback: a tensor's death costs the job no Python call."""
        for ids in (self.ids, self.host):
            for k in [k for k, r in ids.items() if r() is None]:
                del ids[k]

    def is_host(self, t: Any) -> bool:
        """Whether ``t`` is a host copy (:attr:`host`): on CPU the very tensor moved."""
        r = self.host.get(id(t))
        return r is not None and r() is t

    def bound(self, t: Any) -> bool:
        """Whether ``t`` is (or in a GPU run would be) an accelerator's tensor."""
        if (
            self.virtual
            and not (self.host and self.is_host(t))
            and (
                self.has(t)
                or t.requires_grad
                or isinstance(t, self.Parameter)
                or ((b := t._base) is not None and self.bound(b))
            )
        ):
            return True
        return not (t.is_cpu or t.is_meta)  # ``t.device.type not in NOT_DEVICES``, cheaper

    def any_bound(self, args: tuple[Any, ...]) -> bool:
        """Whether a call reads device data: a tensor ``.cpu()`` returned is read on the
        host (in a CPU run it is the very tensor moved, which goes on computing as device
        data: only its direct reads are the host copy's)."""
        Tensor = self.Tensor
        host = self.host
        return any(
            isinstance(a, Tensor)
            and self.bound(a)
            and not (host and (r := host.get(id(a))) is not None and r() is a)
            for a in args[:2]
        )

    def moved_to_host(self, t: Any) -> None:
        """``t`` is a host copy (:attr:`host`); a parameter never is: it stays bound."""
        if isinstance(t, self.Parameter):
            return
        host = self.host
        if len(host) >= MAX_MARKS:
            self.prune()
            if len(host) >= MAX_MARKS:
                host.clear()
        try:
            host[id(t)] = ref(t)
        except TypeError:  # a tensor subclass without weak references
            pass

    def mark(self, t: Any) -> None:
        ids = self.ids
        i = id(t)
        r = ids.get(i)
        if r is not None and r() is t:
            return
        if len(ids) >= MAX_MARKS:
            self.prune()
            if len(ids) >= MAX_MARKS:
                ids.clear()
        try:
            ids[i] = ref(t)
        except TypeError:  # a tensor subclass without weak references
            pass

    def mark_out(self, out: Any) -> Any:
        """Mark a call's result; returns it (an iterator over a tensor is rebuilt from the
        same elements, of the same type, so that each element can be marked)."""
        Tensor = self.Tensor
        if isinstance(out, Tensor):
            self.mark(out)
        elif isinstance(out, tuple | list):
            for o in out:
                if isinstance(o, Tensor):
                    self.mark(o)
        elif type(out).__name__ == "tuple_iterator":
            items = tuple(out)
            for o in items:
                if isinstance(o, Tensor):
                    self.mark(o)
            return iter(items)
        return out

    def spread(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> Any:
        """After a call in a sampled step of a CPU run: mark what it made (and its other
        operands) when it read a device-bound tensor or was sent to a device; what it
        made of host copies alone is a host copy too."""
        Tensor = self.Tensor
        ids = self.ids
        host = self.host
        Parameter = self.Parameter
        dev = copy = False
        others: list[Any] | None = None
        for a in (args, kwargs.values()) if kwargs else (args,):
            for t in a:
                if isinstance(t, Tensor):
                    if host and (h := host.get(id(t))) is not None and h() is t and t.is_cpu:
                        copy = True  # beside device data, a GPU run uses the other copy
                    elif (
                        ((r := ids.get(id(t))) is not None and r() is t)  # marked
                        or t.requires_grad
                        or isinstance(t, Parameter)
                        or not (t.is_cpu or t.is_meta)  # on an accelerator
                        or ((b := t._base) is not None and self.bound(b))  # a view of one
                    ):
                        dev = True
                    elif others is None:
                        others = [t]
                    else:
                        others.append(t)
                elif isinstance(t, tuple | list) and t and isinstance(t[0], Tensor):
                    for b in t:
                        if isinstance(b, Tensor):
                            if host and self.is_host(b):
                                copy = True
                            elif self.bound(b):
                                dev = True
                            elif others is None:
                                others = [b]
                            else:
                                others.append(b)
        if name == "__get__" and isinstance(out, self.device_cls):
            self.follow(out, dev)  # ``x.device``: bound as ``x`` is
            return out
        if not dev and not (
            (name in SENDS or kwargs)
            and self.sent(name, args, kwargs)
            # a factory given device= by torch's own code follows what torch was given
            and (name in SENDS or by_job(sys._getframe(2)))  # the mode's caller's caller
        ):
            return self.host_out(out) if copy else out
        if others and name not in NO_SPREAD:
            for t in others:
                if t.dim() > 0:
                    self.mark(t)
        if name in HOST_OUT:
            if name == "cpu" and isinstance(out, Tensor):
                self.moved_to_host(out)  # device data, now on the host
            return out
        if isinstance(out, Tensor):
            r = ids.get(id(out))
            if r is None or r() is not out:
                self.mark(out)
                if dev and (b := out._base) is not None and _fresh(b, args):
                    self.mark(b)
            return out
        return self.mark_out(out)

    def host_out(self, out: Any) -> Any:
        """A call's result made of host copies alone: host copies (returns it)."""
        if isinstance(out, self.Tensor):
            self.moved_to_host(out)
        elif isinstance(out, tuple | list):
            for o in out:
                if isinstance(o, self.Tensor):
                    self.moved_to_host(o)
        return out


def _fresh(base: Any, args: tuple[Any, ...]) -> bool:
    """Whether ``base``, the tensor a call's result is a view of, is none of its operands
    nor what they are views of: the call's own output, which a tensor subclass returned
    as a view of its own class (fastai's ``TensorBase``, through ``as_subclass``). That
    output is device data as the view is, and the subclass hands it back to the next call
    as another view of it (a plain one): a sibling, known by that base. A view of an
    operand's tensor (a slice of a batch sent to the device, on CPU the host tensor
    itself) says nothing of that tensor."""
    return all(a is not base and getattr(a, "_base", None) is not base for a in args)
