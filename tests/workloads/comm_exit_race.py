"""Two reads of one real flight recorder at once: the sender thread's periodic read and the
exit's final read (tests/test_comm_exit.py).

A 1-rank gloo group makes all-reduces; perftop's ``CommPoller`` reads c10d's ring. The
periodic read runs on a thread of its own and is held just after it took its first new
record (at that record's origin, before it marks the record sent: where the GIL can pass to
another thread), while the final read runs on another thread, as ``atexit`` runs it beside
the sender's. Prints the all-reduces sent (their sequence ids, in order) and whether the
final read waited for the periodic one."""

from __future__ import annotations

import json
import os
import sys
import tempfile
import threading
import types
from typing import Any

os.environ["TORCH_FR_BUFFER_SIZE"] = "256"  # as perftop asks for it, before the first group

import torch
import torch.distributed as dist

from perftop.events import CollBatch
from perftop.hook import collectives
from perftop.hook.sender import epoch_offset


class Sender:
    def __init__(self) -> None:
        self.events: list[Any] = []
        self.epoch_offset = epoch_offset()

    def put(self, ev: Any, urgent: bool = False) -> None:
        self.events.append(ev)


def main() -> None:
    store = dist.FileStore(os.path.join(tempfile.mkdtemp(), "store"), 1)
    dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    t = torch.ones(8)
    for _ in range(20):
        dist.all_reduce(t)
    sender = Sender()
    state = types.SimpleNamespace(sender=sender, tracker=types.SimpleNamespace(thread=0),
                                  internal_error=lambda where: sys.exit(f"internal error: {where}"))  # fmt: skip
    poller = collectives.CommPoller(state)
    poller()  # the first read: the 20 so far
    for _ in range(20):
        dist.all_reduce(t)
    held, go = threading.Event(), threading.Event()
    real = collectives.origin

    def origin(frames: Any) -> Any:
        if threading.current_thread() is periodic and not held.is_set():
            held.set()
            go.wait(20)
        return real(frames)

    collectives.origin = origin
    poller.next_t = 0.0
    periodic = threading.Thread(target=poller)
    periodic.start()
    held.wait(20)
    final = threading.Thread(target=poller, kwargs={"final": True})
    final.start()
    final.join(collectives.FINAL_WAIT_S / 2)
    waited = final.is_alive()
    go.set()
    periodic.join()
    final.join()
    sent = [r[1] for ev in sender.events if isinstance(ev, CollBatch) for r in ev.records
            if r[2] == "all_reduce"]  # fmt: skip
    print(json.dumps({"sent": sent, "final_waited": waited}))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
