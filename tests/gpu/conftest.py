"""tests/gpu/ needs real CUDA. Without it these tests are deselected at collection (not
skipped: CI fails on any skip), and the run says how many were left out and why."""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


def _cuda() -> bool:
    try:
        import torch

        return bool(torch.cuda.is_available())
    except Exception:
        return False


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "gpu: needs a real CUDA device (tests/gpu/)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if _cuda():
        return
    gpu = [i for i in items if HERE in Path(str(i.path)).resolve().parents]
    if gpu:
        keep = [i for i in items if i not in gpu]
        config.hook.pytest_deselected(items=gpu)
        items[:] = keep
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(f"tests/gpu: {len(gpu)} deselected (no CUDA on this machine)")
