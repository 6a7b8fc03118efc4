"""The recording fuzzer's CI sample (issue 43): recordings built by structure (see
tests/recfuzz.py) read in this process by the oracles, and a few through the real
commands. ``scripts/recording_fuzz.py --n 150`` runs a long campaign."""

from __future__ import annotations

import random

from hypothesis import HealthCheck, given, settings

from tests.helpers import perftop
from tests.recfuzz import check, recordings

ALLOWED = {0, 3}  # read (with warnings), or nothing readable: one line either way


@settings(
    max_examples=30,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(rec=recordings())
def test_reading_a_built_recording_keeps_every_promise(tmp_path_factory, rec):
    data, kept = rec
    p = tmp_path_factory.mktemp("fuzz") / "r.perftop"
    p.write_bytes(data)
    assert check(p, kept) is None


def test_the_commands_on_built_recordings_say_one_line_and_exit_0_or_3(tmp_path):
    from hypothesis import seed

    made: list[tuple[bytes, list[int]]] = []

    @seed(random.Random(43).randrange(2**32))
    @settings(max_examples=3, deadline=None, database=None)
    @given(rec=recordings())
    def draw(rec):
        made.append(rec)

    draw()
    for i, (data, _kept) in enumerate(made[-3:]):
        p = tmp_path / f"r{i}.perftop"
        p.write_bytes(data)
        for cmd in (
            ("report", "--json", str(p)),
            ("export", "--csv", str(tmp_path / f"csv{i}"), str(p)),
            ("diff", str(p), str(p)),
        ):
            r = perftop(*cmd, cwd=tmp_path, timeout=60)
            assert r.returncode in ALLOWED, (cmd, r.returncode, r.stderr)
            assert "Traceback" not in r.stderr, (cmd, r.stderr)
            lines = [ln for ln in r.stderr.splitlines() if "error" in ln]
            assert len(lines) <= 1, r.stderr
