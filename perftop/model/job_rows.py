"""The rows that say which process is what to the job: its trainers as their hooks
introduced themselves, its DataLoaders, and each process's role (importers name them from
:mod:`perftop.model.snapshot` too)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Role = Literal["main", "rank", "worker", "other"]  # what a process is to the job


@dataclass(frozen=True, slots=True)
class Trainer:
    """A training process as its hook introduced itself."""

    pid: int
    ppid: int
    host: str
    argv: tuple[str, ...]
    rank: int | None
    local_rank: int | None
    world_size: int | None
    device: str
    torch_version: str
    torch_threads: int | None = None  # torch.get_num_threads() as the hook connected
    # the native id of the thread its training loop runs on, where not the main thread
    # (TrainThread): its wait for a core and its stacks in a stall are read there
    train_tid: int | None = None


@dataclass(frozen=True, slots=True)
class Loader:
    pid: int
    loader_id: int
    num_workers: int
    batch_size: int | None
    pin_memory: bool
    prefetch_factor: int | None
    persistent_workers: bool
    workers: tuple[tuple[int, int], ...]
    dataset: str
    t: float
    host: str = ""  # set where a collector merges nodes
    start_method: str = ""  # the workers' (fork, spawn, forkserver); "" none or unknown
    starts: tuple[float, ...] = ()  # its iterators' starts (each epoch's), the latest last
    grad: bool | None = None  # autograd on at the first batch of any of its iterators
    # the kind of interval outside the steps its first iterator started in (``eval``: an
    # evaluation's loader, though autograd was on, as Keras iterates); "" in the steps
    during: str = ""


@dataclass(frozen=True, slots=True)
class ProcessRole:
    """What a pid is to the job: ``main``, ``rank``, ``worker`` or ``other``."""

    pid: int
    role: Role
    rank: int | None = None
    worker_id: int | None = None
    loader_id: int | None = None
    parent_pid: int | None = None
    host: str = ""  # set where a collector merges nodes (pids are only unique per host)
