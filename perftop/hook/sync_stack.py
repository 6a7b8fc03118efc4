"""The detector's place on torch's function-mode stack: each push has exactly one pop.

Why it needs care. torch dispatches a call to a ``TorchFunctionMode`` with that mode
popped off the stack, and pushes it back when ``__torch_function__`` returns
(``torch.overrides._pop_mode_temporarily``; ``StashTorchFunctionModeGuard`` in C++). A
step can end inside such a call: ``loss.backward()`` dispatches ``Tensor.backward`` to
the mode, and perftop's ``torch.autograd.backward`` wrapper, called inside it, closes the
step. A removal made there finds no mode, torch pushes it back on return, and the next
sample pushes another: the job kept 3-6 copies, each counting every sync, for good.

The design:

- One owner. :class:`Slot` knows whether perftop's push is outstanding (``pushed``) and
  what the sampler wants (``want``). Only :meth:`Slot.settle` changes the stack, and only
  where the stack is as perftop believes it: on the thread that pushed (the stack is per
  thread) and outside the mode's own dispatch (``depth``, counted by the mode's
  ``__torch_function__``). Anywhere else a request only records ``want``; until it is
  settled the mode passes every call straight through (``off``), counting nothing.
- Safe points, where ``settle`` runs: each step end and each interval outside steps the
  tracker reports, and, while a change waits, the next module call: a global forward
  pre-hook registered for that wait only (torch's API; no torch class or function is
  replaced) and removed once it is done. A module call is no torch function, so its
  pre-hook runs outside any mode's dispatch; every step makes one (a loop whose steps
  all end inside a dispatch, ``torch.autograd.grad``'s, settles there). Autograd's
  engine is no safe point: it puts back the stack it found when a backward ends.
- Sooner where it can: a change requested inside a dispatch (a pass's watch that ends at
  ``loss.backward()``, the next step's forward far off) also sets a profile function on
  that thread (``sys.setprofile``, only where none is set), which makes it at the first
  Python or builtin call outside the dispatch where the mode is on the stack itself (not
  held aside by a dispatch of it) and unsets itself: a loop whose code after its backward
  makes no module call (a manual update, the code after the loop) ran under the mode
  until the next one.
- Checked. From a sample's start to the first step end after the mode is out, each step
  end reads the stack (``_get_function_stack_at``: no change to it) and counts perftop's
  modes. Any count but the one expected (a lost or doubled mode, whatever caused it) is
  repaired there and a ``Note`` says so: never silently.
- Exception-safe: a change pops the modes above into a list and pushes them back in a
  ``finally``, in their order; the job's own modes keep theirs.
- A forked child (a DataLoader worker) takes the mode off at once where it can, else at
  its first safe point, and never samples.
- A thread that ends with the mode on its stack (a training thread whose last step was
  watched, or any step in the exact mode) takes it off as it ends: a per-thread
  sentinel, dropped when the thread's state is cleared (on that thread, before its C++
  thread-locals go, which would otherwise free the mode without the GIL: an abort).
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import Any

MARK = "_perftop_sync_mode"  # a class attribute of perftop's modes: how the check finds them


class Slot:
    def __init__(self, torch: Any, mode: Any, note: Callable[[str], None]) -> None:
        self.C = torch._C
        self.register = torch.nn.modules.module.register_module_forward_pre_hook
        self.mode = mode
        self.note = note
        self.want = False
        self.pushed = False
        self.thread: int | None = None  # the thread whose stack holds the push
        self.depth = 0  # the mode's own dispatch depth on that thread (kept by the mode)
        self.trap: Any = None  # the forward pre-hook's handle while a change waits
        self.calls = False  # the profile function waits for a call (:meth:`at_call`)
        self.dirty = False  # checked once more at the next step end
        self.task: Callable[[], int] = getattr(self.C, "_current_graph_task_id", lambda: -1)
        self.local = threading.local()  # each pushing thread's sentinel (_ThreadEnd)

    # -- requests ----------------------------------------------------------------------
    def request(self, want: bool) -> bool:
        """Ask for the mode on or off; returns whether the stack now agrees."""
        if want and not self.pushed:
            self.thread = threading.get_ident()
        self.want = want
        self.mode.off = not want
        self.dirty = True
        return self.settle()

    def safe(self) -> bool:
        """Whether the stack may be changed here: on the pushing thread, outside the mode's
        dispatch and outside autograd's engine (which puts back, when a backward ends, the
        stack it found: a step ended by an optimizer hooked into backward)."""
        return (
            self.depth == 0
            and (self.thread is None or threading.get_ident() == self.thread)
            and self.task() < 0
        )

    def settle(self) -> bool:
        """Make the stack agree with ``want`` where it is safe; else wait for a safe point
        (the forward pre-hook trap armed while a change waits)."""
        if self.pushed == self.want:
            self.disarm()
            return True
        if not self.safe():
            self.arm()
            return False
        self.disarm()  # first: the profile function must not see the change's own calls
        if self.want:
            insert_at_bottom(self.C, self.mode)
            self.pushed = True
            if getattr(self.local, "end", None) is None:
                self.local.end = _ThreadEnd(self)
        else:
            if remove(self.C, self.mode) != 1:
                self.note(
                    "perftop's sync detector did not find its TorchFunctionMode on torch's "
                    "function-mode stack when taking it off (nothing removed)"
                )
            self.pushed = False
        return True

    # -- the check at step ends ----------------------------------------------------------
    def check(self, index: int) -> None:
        """At a step end (safe points only): perftop's modes on the stack are the ones it
        pushed; else repair and say so."""
        if not self.safe():
            return
        self.settle()
        n = count(self.C)
        expected = 1 if self.pushed else 0
        if n == expected:
            if not self.pushed and not self.want:
                self.dirty = False
            return
        while remove_any(self.C):
            pass
        self.pushed = False
        if self.want:
            insert_at_bottom(self.C, self.mode)
            self.pushed = True
        self.note(
            f"perftop's sync detector found its TorchFunctionMode {n} times on torch's "
            f"function-mode stack at the end of step {index} (expected {expected}); restored "
            "the job's stack"
        )

    @property
    def busy(self) -> bool:
        """Whether the next step end must be checked."""
        return self.dirty or self.pushed or self.want or self.trap is not None

    def forget(self) -> None:
        """In a forked child: off for good, out of the stack at the first safe point."""
        self.want = False
        self.mode.off = True
        self.settle()

    # -- the trap: a safe point while a change waits ---------------------------------------
    def arm(self) -> None:
        """A global forward pre-hook (torch's own API: nothing of torch's is replaced) that
        settles at the next module call, outside any dispatch, and goes once settled; and,
        on the thread whose stack it is, the profile function (:meth:`at_call`)."""
        if not self.calls and self.thread == threading.get_ident() and sys.getprofile() is None:
            self.calls = True
            sys.setprofile(self.at_call)
        if self.trap is not None:
            return
        settle = self.settle

        def hook(module: Any, args: Any) -> None:
            try:
                settle()
            except Exception:
                pass  # never in the job's way: the step-end check repairs and says so

        try:
            self.trap = self.register(hook)
        except Exception:
            self.trap = None  # no trap: the next step end or interval settles it

    def disarm(self) -> None:
        trap, self.trap = self.trap, None
        if trap is not None:
            trap.remove()
        if self.calls and self.thread == threading.get_ident():  # (else it unsets itself)
            self.calls = False
            if sys.getprofile() == self.at_call:  # (not where the job set its own since)
                sys.setprofile(None)

    def at_call(self, frame: Any, event: str, arg: Any) -> None:
        """The profile function while a change waits: at a call outside the mode's
        dispatch, on the stack's thread, where the stack is as perftop believes it (the
        mode on it, not held aside by a dispatch of it, for a removal), make the change
        and unset itself; at once where nothing waits any more."""
        if event != "call" and event != "c_call":
            return
        try:
            waits = self.pushed != self.want
            if waits and (not self.safe() or (self.pushed and not count(self.C))):
                return
            self.calls = False
            sys.setprofile(None)
            self.settle()
        except Exception:
            self.calls = False
            sys.setprofile(None)  # never in the job's way: the step-end check repairs


class _ThreadEnd:
    """Held in the pushing thread's ``threading.local``: when that thread ends, its state
    is cleared on it and this is dropped there, taking the mode off its stack."""

    __slots__ = ("slot",)

    def __init__(self, slot: Slot) -> None:
        self.slot = slot

    def __del__(self) -> None:
        slot = self.slot
        try:
            if slot.pushed and slot.thread == threading.get_ident():
                slot.disarm()
                remove(slot.C, slot.mode)
                slot.pushed = False
                slot.thread = None
                slot.dirty = True
        except Exception:
            pass  # never in the job's way (at exit, torch may be gone)


def is_ours(m: Any) -> bool:
    return getattr(type(m), MARK, False) is True


def count(C: Any) -> int:
    """perftop's modes on this thread's stack, read without changing it."""
    at = C._get_function_stack_at
    return sum(1 for i in range(C._len_torch_function_stack()) if is_ours(at(i)))


def _popped(C: Any, until: Callable[[Any], bool]) -> tuple[list[Any], Any]:
    above: list[Any] = []
    while C._len_torch_function_stack():
        m = C._pop_torch_function_stack()
        if until(m):
            return above, m
        above.append(m)
    return above, None


def _restore(C: Any, above: list[Any]) -> None:
    for m in reversed(above):
        C._push_on_torch_function_stack(m)


def insert_at_bottom(C: Any, mode: Any) -> None:
    """``mode`` at the bottom of the stack, above a ``DeviceContext`` (which must stay
    lowest), as torch's ``DeviceContext`` itself goes: a user's mode entered before and
    left after pops itself, never this one."""
    above, _ = _popped(C, lambda m: False)
    try:
        if above and type(above[-1]).__name__ == "DeviceContext":
            C._push_on_torch_function_stack(above.pop())
        C._push_on_torch_function_stack(mode)
    finally:
        _restore(C, above)


def remove(C: Any, mode: Any) -> int:
    """Take ``mode`` off wherever it is; returns how many were taken (0 or 1)."""
    above, found = _popped(C, lambda m: m is mode)
    _restore(C, above)
    return 0 if found is None else 1


def remove_any(C: Any) -> bool:
    """Take the topmost of perftop's modes off; whether there was one."""
    above, found = _popped(C, is_ours)
    _restore(C, above)
    return found is not None
