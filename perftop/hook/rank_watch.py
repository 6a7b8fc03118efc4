"""A rank's place in its job where its launcher did not write it into the environment.

torchrun sets ``RANK`` and ``WORLD_SIZE`` before a rank starts, and the hook's Hello carries
them. ``torch.multiprocessing.spawn`` (PyTorch's own DDP tutorial) and Lightning's launcher
(``Fabric.launch()``, the Trainer's ``ddp`` strategy: the first rank is the process the
user started, the others its children with ``LOCAL_RANK`` only) pass the rank to
``init_process_group`` instead, so their ranks would show as anonymous trainers. Once the
job has initialized ``torch.distributed``, the sender's thread (never the training thread)
reads the default group's rank and size and, where the Hello said otherwise, greets again:
the monitor takes a process's place from its latest Hello. Nothing of torch's is wrapped;
before the group exists, a wake costs one ``sys.modules`` lookup and
``is_initialized()``.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from perftop.hook.state import env_int


class RankWatch:
    """Called on every wake of the sender's thread (``Sender.pollers``) until the job's
    default process group is seen."""

    def __init__(self, state: Any) -> None:
        self.state = state
        self.pid = os.getpid()
        self.done = False

    def __call__(self, final: bool = False) -> None:
        if self.done or os.getpid() != self.pid:  # a forked worker: not this rank
            return
        dist = sys.modules.get("torch.distributed")
        if dist is None:
            return
        try:
            if not dist.is_available() or not dist.is_initialized():
                return
            rank, world = int(dist.get_rank()), int(dist.get_world_size())
        except Exception:  # a group torn down between the two calls: asked again next wake
            return
        self.done = True
        if (rank, world) != (env_int("RANK"), env_int("WORLD_SIZE")):
            st = self.state
            st.place = (self.pid, rank, world)
            st.sender.put(st.hello(), urgent=True)


def attach(state: Any) -> None:
    """Watch for the job's process group (before the collectives' poller: the monitor has
    the rank before the first records of its collectives)."""
    state.sender.pollers.insert(0, RankWatch(state))
