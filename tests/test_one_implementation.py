"""Logic that once existed twice, with different behaviour, now has one home."""

from __future__ import annotations

from perftop.hook.state import env_int
from perftop.model.roles import assign_roles
from perftop.model.snapshot import Loader, Meta, Snapshot, Trainer
from perftop.tui.widgets.processes import table_rows


def test_env_int_one_behaviour_for_ranks_and_settings(monkeypatch):
    monkeypatch.delenv("PERFTOP_X", raising=False)
    assert env_int("PERFTOP_X") is None and env_int("PERFTOP_X", 3) == 3
    for bad in ("", "three", "1.5"):
        monkeypatch.setenv("PERFTOP_X", bad)
        assert env_int("PERFTOP_X", 3, minimum=0) == 3  # a typo keeps the default
    monkeypatch.setenv("PERFTOP_X", "-2")
    assert env_int("PERFTOP_X") == -2 and env_int("PERFTOP_X", 3, minimum=0) == 0
    monkeypatch.setenv("PERFTOP_X", " 7 ")
    assert env_int("PERFTOP_X", 3, minimum=0) == 7


def _ddp_roles():
    trainers = [Trainer(200 + r, 100, "h", (), r, r, 2, "cpu", "") for r in (1, 0)]
    loaders = [
        Loader(200 + r, 0, 2, 8, False, 2, False, ((0, 300 + 10 * r), (1, 301 + 10 * r)), "", 0)
        for r in (1, 0)
    ]
    return assign_roles(Meta(job_pid=100), trainers, loaders)


def test_processes_panel_sorts_roles_in_the_reports_order():
    roles = _ddp_roles()
    assert [(r.role, r.rank, r.worker_id) for r in roles] == [
        ("rank", 0, None),
        ("rank", 1, None),
        ("worker", 0, 0),
        ("worker", 0, 1),
        ("worker", 1, 0),
        ("worker", 1, 1),
        ("other", None, None),
    ]
    rows = table_rows(Snapshot(roles=roles))
    keys = {int(pid): cells[0].value for pid, cells in rows.items()}
    by_panel = sorted(keys, key=keys.get)
    assert by_panel == [r.pid for r in roles]
    assert len(set(keys.values())) == len(keys)  # a total order: no two rows tie
