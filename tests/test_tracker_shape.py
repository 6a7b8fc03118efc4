"""The compiled tracker's shape matches the plain one's, and its typed twin (hook/shape.py).

``steps.py`` is compiled with the C declarations of ``_steps_fast.pxd``: an attribute that the
plain build sets but the .pxd does not declare works in the plain build and, compiled, raises
AttributeError inside the hook, which drops the step silently. So every attribute that the
tracker's modules assign, on ``self`` in ``StepTracker`` or on ``tr`` in its helpers, must be
declared there.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

HOOK = Path(__file__).resolve().parents[1] / "perftop" / "hook"
# The modules that set attributes on the tracker: found (below) as every hook module that
# assigns on ``tr`` (its helpers' name for it) or on ``self`` in ``StepTracker``, so a cold
# path moved to a module of its own is checked too. These, at least:
CORE_MODULES = {"steps.py", "steps_cold.py", "gaps.py", "gap_bounds.py", "gap_forward.py"}


def declared() -> set[str]:
    """Names in ``cdef public <type> a, b, c`` lines of StepTracker's block in the .pxd
    (a C pointer's too: ``cdef double *a``)."""
    text = (HOOK / "_steps_fast.pxd").read_text()
    block = text.split("cdef class StepTracker:", 1)[1]
    names: set[str] = set()
    for line in block.splitlines():
        m = re.match(r"\s+cdef\s+(?:public\s+|readonly\s+)?[\w.]+(?:\s+long)*\s+(.+)$", line)
        decl = m.group(1).split("#")[0] if m else ""
        if m and "(" not in decl:  # not a method
            names.update(n.strip().lstrip("*") for n in decl.split(","))
        elif line and not line[0].isspace():
            break  # the end of the class's block
    return {n for n in names if n}


def assigned(path: Path) -> set[str]:
    """Attributes assigned on ``self`` inside ``class StepTracker`` or on ``tr`` anywhere."""
    tree = ast.parse(path.read_text())
    found: set[str] = set()

    def targets(node: ast.AST) -> list[ast.expr]:
        if isinstance(node, ast.Assign):
            out: list[ast.expr] = []
            for t in node.targets:
                out.extend(t.elts if isinstance(t, ast.Tuple) else [t])
            return out
        if isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            return [node.target]
        return []

    def visit(node: ast.AST, owner: str | None) -> None:
        for t in targets(node):
            if (
                isinstance(t, ast.Attribute)
                and isinstance(t.value, ast.Name)
                and (t.value.id == "tr" or (t.value.id == "self" and owner == "StepTracker"))
            ):
                found.add(t.attr)
        for child in ast.iter_child_nodes(node):
            inner = child.name if isinstance(child, ast.ClassDef) else owner
            visit(child, inner)

    visit(tree, None)
    return found


def test_pxd_parser_reads_the_declarations() -> None:
    names = declared()
    # A few of the tracker's long-standing attributes, of each C type, so a parser that
    # reads nothing cannot make the test below pass.
    assert {"emit", "mode", "index", "running", "start", "held", "train_loaders"} <= names


TRACKER_MODULES = sorted(p.name for p in HOOK.glob("*.py") if assigned(p))


def test_the_tracker_modules_are_found() -> None:
    assert set(TRACKER_MODULES) >= CORE_MODULES, TRACKER_MODULES


@pytest.mark.parametrize("module", TRACKER_MODULES)
def test_every_tracker_attribute_is_declared_for_the_compiled_build(module: str) -> None:
    missing = assigned(HOOK / module) - declared()
    assert not missing, (
        f"{module} sets {sorted(missing)} on the tracker, undeclared in _steps_fast.pxd: "
        "the compiled build would raise there and lose steps"
    )


def test_the_check_catches_an_undeclared_attribute(tmp_path: Path) -> None:
    src = tmp_path / "mod.py"
    src.write_text("def f(tr):\n    tr.brand_new_field = 1\n    tr.index += 1\n")
    assert assigned(src) - declared() == {"brand_new_field"}


def test_the_typed_shape_names_the_same_attributes_as_the_pxd() -> None:
    from perftop.hook.shape import Tracker

    typed = set(Tracker.__annotations__)
    assert typed == declared(), (
        f"only in shape.py: {sorted(typed - declared())}; "
        f"only in _steps_fast.pxd: {sorted(declared() - typed)}"
    )
