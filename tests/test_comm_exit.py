"""Each collective once when the exit's read meets the sender thread's (issue 46's live
collectives). At exit the hook reads c10d's flight recorder a last time on the exiting
thread while the sender's thread may be reading it too: each sent the records past where
the other had got to, so a 2-rank DDP job's second rank read 575 all-reduces for its 400
steps (`test_launched_ranks.py`, on a machine loaded by four test processes). Real torch,
a real 1-rank gloo group and its ring, the two reads on real threads, held at the one place
the race needs (``tests/workloads/comm_exit_race.py``)."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.helpers import WORKLOADS


def test_the_exits_read_beside_the_sender_threads_sends_each_collective_once() -> None:
    p = subprocess.run([sys.executable, str(WORKLOADS / "comm_exit_race.py")], text=True,
                       capture_output=True, timeout=120, stdin=subprocess.DEVNULL)  # fmt: skip
    assert p.returncode == 0, p.stderr[-3000:]
    out = json.loads(p.stdout.splitlines()[-1])
    # every all-reduce, each once, in the order made (their sequence ids run 1..40)
    assert out["sent"] == list(range(1, 41)), out
    assert out["final_waited"], out  # it waited for the read under way, then read the rest
