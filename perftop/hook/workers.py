"""Inside each DataLoader worker: how long it takes to make a batch, and how busy it is.

The hook runs in every worker (forked workers inherit it, spawned ones install it from
``sitecustomize``). ``_DatasetKind.create_fetcher`` is wrapped once in the main process;
it runs once per worker (and per epoch with persistent workers), and only there, in a
worker, does it wrap that fetcher's ``fetch``: the main process and ``num_workers=0``
loaders keep torch's own code on their hot path.

Per batch the worker only adds up wall time, thread CPU time and tensor bytes; a few
times a second (and once more as it exits, through multiprocessing's finalizers, which
run where ``atexit`` does not) it sends one :class:`WorkerStats` with its running totals,
from its own thread without waiting: no thread of perftop's runs in a worker, so an idle
worker costs nothing. Nothing here blocks the worker or raises into it.
"""

from __future__ import annotations

import functools
import os
import time
from typing import Any

from perftop.events import WorkerStats
from perftop.hook.state import HookState

REPORT_EVERY_S = 0.5  # the TUI redraws every 0.5 s; a report is a wake-up of the monitor
BYTES_DEPTH = 3  # how deep batch_bytes looks into nested tuples, lists and dicts
BYTES_ITEMS = 64  # and how many items of each container it looks at


class WorkerMeter:
    """The running totals of one worker process."""

    __slots__ = ("state", "info", "torch", "start_t", "batches", "busy", "cpu", "nbytes",
                 "last_sent", "pid")  # fmt: skip

    def __init__(self, state: HookState, torch: Any, info: Any) -> None:
        self.state = state
        self.torch = torch
        self.info = info
        self.pid = os.getpid()
        self.start_t = time.time()
        self.batches = 0
        self.busy = 0.0
        self.cpu = 0.0
        self.nbytes: int | None = 0
        self.last_sent = 0.0

    def wrap(self, fetch: Any) -> Any:
        perf, thread_time = time.perf_counter, time.thread_time

        @functools.wraps(fetch)
        def timed_fetch(index: Any) -> Any:
            c0, t0 = thread_time(), perf()  # (pass_meter.cpu_wall: a core's wait before)
            batch = fetch(index)  # StopIteration and user errors pass through untouched
            try:
                t1 = perf()
                self.busy += t1 - t0
                self.cpu += thread_time() - c0
                self.batches += 1
                if self.nbytes is not None:
                    self.nbytes += tensor_bytes(batch, self.torch.Tensor, BYTES_DEPTH)
                if t1 - self.last_sent >= REPORT_EVERY_S:
                    self.last_sent = t1
                    self.send(False)
            except Exception:
                self.nbytes = None
                self.state.internal_error("worker fetch")
            return batch

        return timed_fetch

    def send(self, final: bool) -> None:
        if self.pid != os.getpid():  # a process forked from the worker: not ours
            return
        try:
            threads: int | None = int(self.torch.get_num_threads())
        except Exception:
            threads = None
        self.state.sender.put(
            WorkerStats(
                t=time.time(),
                pid=self.pid,
                ppid=os.getppid(),
                worker_id=int(self.info.id),
                num_workers=int(self.info.num_workers),
                start_t=self.start_t,
                batches=self.batches,
                busy_s=round(self.busy, 6),
                cpu_s=round(self.cpu, 6),
                batch_bytes=self.nbytes,
                torch_threads=threads,
                final=final,
            ),
            urgent=True,  # the worker's own thread sends it now (Sender.pin_solo)
        )

    def close(self) -> None:
        """The worker is exiting: last totals, then a flush bounded by 100 ms."""
        try:
            self.send(True)
            self.state.sender.close()  # one 100 ms deadline, as at any exit
        except Exception:
            pass


def tensor_bytes(obj: Any, tensor: Any, depth: int) -> int:
    """Bytes of the tensors in a batch (a tensor, or tuples/lists/dicts of them)."""
    if isinstance(obj, tensor):
        return obj.element_size() * obj.numel()
    if depth <= 0:
        return 0
    if isinstance(obj, dict):
        obj = list(obj.values())
    if isinstance(obj, tuple | list):
        return sum(tensor_bytes(o, tensor, depth - 1) for o in obj[:BYTES_ITEMS])
    return 0


_meter: WorkerMeter | None = None


def attach(state: HookState, torch: Any) -> None:
    """Wrap ``create_fetcher`` so fetchers made inside workers are timed."""
    from torch.utils.data import dataloader as dl

    kind = dl._DatasetKind
    orig = kind.__dict__["create_fetcher"]
    create = orig.__func__ if isinstance(orig, staticmethod) else orig

    @functools.wraps(create)
    def create_fetcher(*args: Any, **kwargs: Any) -> Any:
        fetcher = create(*args, **kwargs)
        try:
            _instrument(state, torch, fetcher)
        except Exception:
            state.internal_error("worker fetcher")
        return fetcher

    kind.create_fetcher = staticmethod(create_fetcher)  # type: ignore[method-assign]
    state.undo.append(lambda: setattr(kind, "create_fetcher", orig))


def _instrument(state: HookState, torch: Any, fetcher: Any) -> None:
    global _meter
    info = torch.utils.data.get_worker_info()
    if info is None:  # the main process (num_workers=0): leave it alone
        return
    meter = _meter
    if meter is None or meter.pid != os.getpid():
        meter = _meter = WorkerMeter(state, torch, info)
        state.sender.pin_solo()
        from multiprocessing import util

        util.Finalize(None, meter.close, exitpriority=100)
    fetcher.fetch = meter.wrap(fetcher.fetch)
