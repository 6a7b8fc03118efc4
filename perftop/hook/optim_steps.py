"""Timing ``optimizer.step()`` through torch's global optimizer hooks, and nothing else.

torch wraps each optimizer class's ``step`` once, at the first optimizer of the class
(``Optimizer._patch_step_function``), in a function that runs the global and
per-optimizer hook tables before and after the step. perftop registers one pre-hook and
one post-hook there (``register_optimizer_step_pre_hook``, a public API) and replaces
nothing: each class's ``step`` and ``_patch_step_function`` stay torch's own objects, as
TorchScript, dynamo, ``inspect`` and pickling see them (tests/test_torch_invariants.py).

A step with a closure (LBFGS, Lightning) is timed apart: the pre-hook hands torch a timed
closure in the step's arguments, as torch's hook contract allows.

dynamo traces a compiled ``opt.step()`` with the hooks in it and skips them as no-ops
(``torch_patch._dynamo_ignores``), so the compiled step compiles as it does without
perftop, and perftop does not see it: such steps are not counted or timed. There is no
safe way to see them (anything perftop's in the traced code would break the graph), so
perftop says so, once, when dynamo starts compiling torch's step wrapper (the frame's code,
read off dynamo's ``compile_inner`` from its start callback; nothing is changed).

The price, estimated from the callgrind counts in docs/benchmarks.md (not measured again):
torch's loops over its hook tables run on every step, about a microsecond of code that is
cold again after each step's torch work. An
earlier build saved it by replacing each class's ``step``: a breach of the rule above.
"""

from __future__ import annotations

import sys
from types import FrameType
from typing import Any

from perftop.hook.compile_watch import CompileWatch
from perftop.hook.state import HookState

COMPILED_STEP_NOTE = (
    "torch.compile traces an optimizer step: perftop's optimizer hooks are skipped inside "
    "compiled code, so steps whose opt.step() is compiled are not counted or timed "
    "(perftop.step() after each one marks them)"
)


def install(state: HookState, optim_mod: Any, watch: CompileWatch) -> None:
    """The tracker's pre- and post-hook in torch's global tables, removed on undo."""
    tr = state.tracker
    try:
        state.handles.append(optim_mod.register_optimizer_step_pre_hook(tr.opt_pre_hook))
        state.handles.append(optim_mod.register_optimizer_step_post_hook(tr.opt_post_hook))
    except Exception:
        state.internal_error("optimizer hooks")
        return
    told = [False]

    def started() -> None:
        if not told[0] and _compiling_a_step(optim_mod.__file__):
            told[0] = True
            state.sender.note("warning", COMPILED_STEP_NOTE)

    watch.listen(lambda: None, started)


def _compiling_a_step(optim_file: str) -> bool:
    """Whether the frame dynamo starts compiling is torch's optimizer step wrapper: the
    ``code`` argument of dynamo's ``compile_inner``, a few frames up from its start
    callback (read only; False where it is not found)."""
    f: FrameType | None = sys._getframe(1)
    for _ in range(12):
        if f is None:
            return False
        if f.f_code.co_name == "compile_inner":
            code = f.f_locals.get("code")
            return getattr(code, "co_filename", None) == optim_file
        f = f.f_back
    return False
