"""The saved replay index: written when a recording closes, rebuilt and saved by a replay
when missing or stale, read back at once; a foreign sidecar never runs code."""

from __future__ import annotations

import os
import pickle
import random
import time
import zlib
from pathlib import Path

import pytest

from perftop.events import JobExit, JobStart, SessionStart, Step
from perftop.monitor.hub import Hub
from perftop.replay import autosave, saved
from perftop.replay.checkpoint import session_from
from perftop.replay.index import ReplayIndex
from perftop.replay.player import Player
from tests.helpers import replay_bench


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """6,000 steps with samples, stalls and an evaluation pause, written without an index
    (as an older perftop, or a crashed recorder, leaves it)."""
    path = tmp_path_factory.mktemp("saved") / "run.perftop"
    replay_bench().generate(path, 6000, 2, 0.05, eval_every=2500)
    return path


def test_closing_a_recording_saves_its_index(tmp_path: Path) -> None:
    path = tmp_path / "small.perftop"
    w = Hub().record(path)  # the monitor's recordings save their index when they close
    assert w.on_close is autosave.index_after_recording
    w.write_events(
        [
            SessionStart(100.0, ("python", "t.py"), "/w", "h", 1, "0"),
            JobStart(100.0, 7, ("python",)),
        ]
    )
    w.write_events([Step(7, i, 100.0 + i * 0.1, 100.0 + i * 0.1 + 0.09) for i in range(500)])
    w.write_events([JobExit(150.0, 7, 0)])
    w.close()
    assert saved.sidecar(path).exists()
    ix = ReplayIndex(path).start()
    assert ix.loaded and ix.done and ix.steps == 500 and ix.events == 503


def test_a_replay_builds_saves_and_then_reads_the_index(recording: Path) -> None:
    side = saved.sidecar(recording)
    side.unlink(missing_ok=True)
    built = ReplayIndex(recording).start()
    assert not built.loaded and built.wait(120) and built.saved_to == side and side.exists()
    ix = ReplayIndex(recording).start()
    assert ix.loaded and ix.done  # at once: no thread
    for name in ("stalls", "gaps", "hint_changes", "between_marks"):
        assert getattr(ix, name) == [tuple(m) for m in getattr(built, name)], name
    assert (ix.start_t, ix.end_t, ix.events, ix.steps, ix.primary) == (
        built.start_t, built.end_t, built.events, built.steps, built.primary
    )  # fmt: skip
    assert ix.stalls and ix.gaps
    a, b = Player(ix), Player(built)
    rnd = random.Random(3)
    for _ in range(4):
        k = rnd.randrange(ix.events)
        a.seek_event(k)
        b.seek_event(k)
        assert a.events == b.events == k and a.snapshot() == b.snapshot()
    a.seek_step(4000)
    assert a.steps() == 4000


def test_a_large_recording_is_indexed_by_a_detached_process(
    recording: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past INLINE_BYTES the closing recorder starts ``python -m perftop.replay.autosave``
    and returns at once; that process saves the sidecar."""
    copy = tmp_path / "large.perftop"
    copy.write_bytes(recording.read_bytes())
    monkeypatch.setattr(autosave, "INLINE_BYTES", 1024)  # this recording counts as large
    autosave.index_after_recording(copy)
    side = saved.sidecar(copy)
    deadline = time.monotonic() + 120
    while not side.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert ReplayIndex(copy).start().loaded


def test_a_changed_recording_or_damaged_sidecar_is_rebuilt(recording: Path, tmp_path: Path) -> None:
    copy = tmp_path / "grown.perftop"
    copy.write_bytes(recording.read_bytes())
    ReplayIndex(copy).start().wait(120)
    side = saved.sidecar(copy)
    assert ReplayIndex(copy).start().loaded
    with open(copy, "ab") as f:  # the recording grew (a recorder appended to it)
        f.write(b"\0" * 7)
    stale = ReplayIndex(copy).start()
    assert not stale.loaded and stale.wait(120) and stale.saved_to == side
    assert ReplayIndex(copy).start().loaded  # saved again, for the grown file
    side.write_bytes(side.read_bytes()[:-5])  # a cut sidecar
    assert not ReplayIndex(copy).start().loaded


def test_unwritable_sidecar_still_replays(recording: Path, tmp_path: Path) -> None:
    copy = tmp_path / "ro.perftop"
    copy.write_bytes(recording.read_bytes())
    saved.sidecar(copy).mkdir()  # in the way: the index cannot be written there
    ix = ReplayIndex(copy).start()
    assert ix.wait(120) and ix.saved_to is None and ix.error is None
    assert not list(tmp_path.glob(".*.tmp"))
    p = Player(ix)
    p.seek_step(3000)
    assert p.steps() == 3000


def _loaded(recording: Path) -> bool:
    """Whether an index of ``recording`` was read from its sidecar; one built instead is
    waited for (and saved), so that no save of it races the test's next step (a build left
    running saved, at this process's temporary name, while the next one did: CI)."""
    ix = ReplayIndex(recording).start()
    loaded = ix.loaded
    assert ix.wait(120)
    return loaded


def test_a_sidecar_is_private_and_one_another_user_could_write_is_not_read(
    recording: Path, tmp_path: Path
) -> None:
    """The index holds the recording's sessions (the job's output, its command line): as
    private as the recording (0600). On a shared folder another user may leave a sidecar
    beside a recording, or a link at its temporary name: one not this user's, or writable
    by others, is built again, and no link is written through."""
    copy = tmp_path / "shared.perftop"
    copy.write_bytes(recording.read_bytes())
    assert ReplayIndex(copy).start().wait(120)
    side = saved.sidecar(copy)
    assert side.stat().st_mode & 0o777 == 0o600
    assert ReplayIndex(copy).start().loaded
    side.chmod(0o666)  # anyone's to write
    assert not _loaded(copy)
    side.chmod(0o600)
    if os.geteuid() == 0:  # root may give it away: another user's
        os.chown(side, 4242, 4242)
        assert not _loaded(copy)
        os.chown(side, 0, 0)
    side.unlink()
    victim = tmp_path / "victim"
    victim.write_text("theirs")
    link = side.with_name(f".{side.name}.{os.getpid()}.tmp")
    link.symlink_to(victim)  # where this process's save would write first
    ix = ReplayIndex(copy).start()
    assert ix.wait(120)  # the link removed (in a sticky /tmp, not: then not saved)
    assert victim.read_text() == "theirs" and not link.is_symlink()
    assert side.stat().st_mode & 0o777 == 0o600 and not side.is_symlink()


class _Evil:
    def __reduce__(self):  # what a crafted sidecar could hold
        import os

        return (os.system, ("touch /tmp/perftop-pwned",))


def test_checkpoints_never_run_code() -> None:
    data = zlib.compress(pickle.dumps(_Evil()))
    with pytest.raises(ValueError, match="not allowed"):
        session_from(data)
