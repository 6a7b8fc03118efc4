"""perftop installs and reports without torch; only the demo needs it, and says so."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEMO_RECORDING = ROOT / "screenshots" / "demo.perftop"

# Runs perftop's CLI in a Python where `import torch` fails, as in a venv without it.
NO_TORCH = "import sys; sys.modules['torch'] = None; from perftop.cli import main; sys.exit(main({argv!r}))"


def _without_torch(*argv: str) -> subprocess.CompletedProcess[str]:
    code = NO_TORCH.format(argv=list(argv))
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT
    )


def test_torch_and_numpy_are_not_required():
    text = (ROOT / "pyproject.toml").read_text()  # tomllib is 3.11+; perftop runs on 3.10
    deps = re.search(r"^dependencies = \[(.*?)\]", text, re.S | re.M).group(1)
    assert "psutil" in deps and "torch" not in deps and "numpy" not in deps
    assert re.search(r'^demo = \["torch>=', text, re.M)
    # `license = "MIT"` (an SPDX string) is only understood from setuptools 77 on.
    assert re.search(r'^license = "MIT"', text, re.M)
    assert re.search(r'^requires = \["setuptools>=77"[,\]]', text, re.M)  # and Cython


def test_report_runs_without_torch():
    r = _without_torch("report", str(DEMO_RECORDING))
    assert r.returncode == 0, r.stderr
    assert "150 steps" in r.stdout


def test_demo_without_torch_says_how_to_get_it_in_one_line():
    r = _without_torch("demo", "--headless", "--no-record")
    assert r.returncode == 1
    assert r.stderr.strip().count("\n") == 0 and "Traceback" not in r.stderr
    assert "pip install 'perftop[demo]'" in r.stderr


def test_no_assert_in_production_code():
    """`assert` vanishes under `python -O`: perftop's checks are real errors."""
    found = []
    for path in sorted((ROOT / "perftop").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Assert):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert found == []
