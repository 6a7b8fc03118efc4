"""torch.distributed.checkpoint's ``save`` (DCP: FSDP2's checkpoint, torchtitan's) in a real
2-rank gloo job under torchrun (``tests/workloads/dcp_save.py``): each call is one
checkpoint on each rank, as long as the rank's own timer of it. DCP gathers each rank's
plan, scatters the global one, has each rank write its items (a ``torch.save`` each) and
the coordinator write the metadata once it has every rank's results: only the saves'
span was seen, 5-18 of each 30-70 ms, and the collectives around it were the next
step's."""

from __future__ import annotations

import json
import sys

from perftop.events import Between
from perftop.recording import read_events
from tests.helpers import WORKLOADS, run_and_report


def test_each_dcp_save_is_one_checkpoint_on_each_rank(tmp_path) -> None:
    out = tmp_path / "own"
    out.mkdir()
    proc, rep = run_and_report(tmp_path, sys.executable, "-m", "torch.distributed.run",
                               "--standalone", "--nproc_per_node=2",
                               str(WORKLOADS / "dcp_save.py"), str(out))  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    own = [json.loads(p.read_text()) for p in sorted(out.glob("rank*.json"))]
    assert [w["rank"] for w in own] == [0, 1]
    events = list(read_events(tmp_path / "r.perftop"))
    for w in own:
        assert w["steps"] == 40
        mine = [e for e in events if isinstance(e, Between) and e.pid == w["pid"]]
        assert [e.kind for e in mine] == ["checkpoint"] * len(w["save_s"]) == ["checkpoint"] * 4
        for i, (e, c) in enumerate(zip(mine, w["save_s"], strict=True)):
            # inside the rank's timer of dcp.save; what dcp.save does before the function
            # perftop times (its storage writer's setup) is a few ms once the first call's
            # lazy imports are done
            low = 0.0 if i == 0 else 0.8 * c - 0.005
            assert low <= e.length <= c + 0.0005, (w["rank"], mine, w["save_s"])
