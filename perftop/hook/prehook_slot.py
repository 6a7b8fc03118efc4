"""Where first_forward.py's one-shot pre-hook goes: its slot in torch's table of global
forward pre-hooks, set and popped under one key. Apart from the hook's timing: it only puts
the hook in torch's table and takes it out (tests/test_prehook_slot.py, the feeder timing
benchmark's ``slot`` arm).
"""

from __future__ import annotations

from typing import Any

KEY = -0x7065_7266  # the hook's key in torch's table of global forward pre-hooks (torch's
# own keys, its RemovableHandle ids, count up from 0)


class PreHookSlot:
    """The one-shot pre-hook's place in torch's table of global forward pre-hooks
    (``_global_forward_pre_hooks``, the dict ``register_module_forward_pre_hook`` fills and
    ``Module._call_impl`` reads, looked up at each use as torch's call does): set and
    popped under one fixed key, at each step's end. Timed inside a tight loop (313 µs
    steps), torch's call and its handle's ``remove()`` cost ~8 µs a step more than this (a
    new handle and a new key each step); the table holds the same hook either way, and
    nothing of torch's is replaced. Where the table is no dict (another torch), torch's
    call."""

    def __init__(self, module: Any, register: Any) -> None:
        self.module = module  # torch.nn.modules.module
        self.register = register  # torch's register_module_forward_pre_hook
        self.table: dict[Any, Any] | None = None  # where the hook is, while it is
        self.handle: Any = None
        self.held = False  # the hook is in torch's table (put, not yet taken)

    def put(self, hook: Any) -> None:
        table = self.table_of()
        if isinstance(table, dict):
            table[KEY] = hook
            self.table = table
        else:
            self.handle = self.register(hook)
        self.held = True

    def table_of(self) -> Any:
        """torch's table where the hook goes (None: not a dict, torch's call used)."""
        return getattr(self.module, "_global_forward_pre_hooks", None)

    def take(self) -> None:
        self.held = False
        table, self.table = self.table, None
        if table is not None:
            table.pop(KEY, None)
        h, self.handle = self.handle, None
        if h is not None:
            h.remove()
