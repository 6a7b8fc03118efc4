"""torch's flight recorder, as the hook's collectives poller uses it
(:mod:`perftop.hook.collectives`): the settings perftop asks for in the job's environment,
how its rings are read, and what a record's sizes come to."""

from __future__ import annotations

import json
import os
from typing import Any

ENV_OFF = "PERFTOP_COMM"
ENV_BUFFER = "TORCH_FR_BUFFER_SIZE"
# Its older name, which torch still reads (TORCH_FR_BUFFER_SIZE wins where both are set): a
# job that set it has chosen its ring, and perftop must not override that choice.
ENV_BUFFER_OLD = "TORCH_NCCL_TRACE_BUFFER_SIZE"
# The ring perftop asks for when the job did not set one. A read's cost grows faster than
# the ring (benchmarks/comm_recorder.py: 64 entries under 1 ms, 512 entries 15-60 ms on a
# loaded 2-core machine), and two reads a second must see every record: 256.
BUFFER = 256
# NCCL's GPU time of each collective (CUDA events its watchdog reads once the work is done),
# used where the job turned it on; never set here: its events can cost a job its compute
# and communication overlap (pytorch/pytorch#143890, CUDA_DEVICE_MAX_CONNECTIONS=1)
ENV_TIMING = "TORCH_NCCL_ENABLE_TIMING"
_DTYPE_BYTES = {"Float": 4, "Double": 8, "Half": 2, "BFloat16": 2, "Long": 8, "Int": 4, "Short": 2,
                "Char": 1, "Byte": 1, "Bool": 1, "ComplexFloat": 8, "ComplexDouble": 16}  # fmt: skip


def enabled(environ: Any = os.environ) -> bool:
    return environ.get(ENV_OFF, "").strip() != "0"


def prepare_env(environ: Any = os.environ) -> None:
    """Once the hook is armed, before the job's first process group (torch reads the
    setting when it makes the recorder, at the first group): ask for the recorder's ring,
    unless the job set its own size. In every process, as a rank is not always known by its
    environment: torchrun sets ``WORLD_SIZE``, but Ray Train sets it only just before its
    first group, and ``torch.multiprocessing.spawn`` and Lightning's launcher pass the rank
    to ``init_process_group``. A process that makes no group records nothing; one that
    does keeps 256 entries (torch 2.13's default is 2,000, which a read could not afford)."""
    if enabled(environ) and ENV_BUFFER not in environ and ENV_BUFFER_OLD not in environ:
        environ[ENV_BUFFER] = str(BUFFER)


def gpu_timed(environ: Any = os.environ) -> bool:  # torch reads the flag as a boolean
    return environ.get(ENV_TIMING, "").strip().lower() in ("1", "true", "yes", "y")


def untimed(e: Any) -> bool:  # an NCCL record the watchdog has not retired with its time
    name = str(e.get("profiling_name", ""))
    return name.startswith("nccl:") and e.get("duration_ms") is None and not e.get("retired")


def buffer_size(environ: Any = os.environ) -> int:
    """The recorder's ring as torch reads it: the new name first, then the old one."""
    for name in (ENV_BUFFER, ENV_BUFFER_OLD):
        if name in environ:
            try:
                return int(environ[name] or 0)
            except ValueError:
                return 0
    return 0


def nbytes(sizes: Any, dtypes: Any) -> int:
    total = 0
    for shape, dt in zip(sizes or (), dtypes or ()):
        n = 1
        for d in shape:
            n *= int(d)
        total += n * _DTYPE_BYTES.get(str(dt), 4)
    return total


def sizes(e: Any) -> str:
    """A record's input shapes as text ("[[17]]"), at most 200 characters."""
    return json.dumps(e.get("input_sizes") or [], separators=(",", ":"))[:200]


def readers(c10d: Any) -> list[tuple[str, Any]]:
    """The recorder's rings this torch can read, each as a call giving a dict: c10d's
    own (``_dump_fr_trace``: gloo) and, in a CUDA build, NCCL's (``_dump_nccl_trace``),
    which torch 2.13 keeps apart. A torch whose two names read one ring gives each record
    twice: the poller (:mod:`perftop.hook.collectives`) keeps one."""
    out = []
    for name, base in (("fr", "_dump_fr_trace"), ("nccl", "_dump_nccl_trace")):
        read = reader(c10d, base)
        if read is not None:
            out.append((name, read))
    return out


def reader(c10d: Any, base: str = "_dump_fr_trace") -> Any:
    """A call that reads one ring as a dict: torch's pickled dump (``base``) with the
    Python stacks it kept (where each collective came from: :mod:`coll_origin`), else its
    JSON dump (``base + "_json"``); None where this torch has neither. A dump with stacks
    that fails is made without them from then on. The pickle is torch's own, made in this
    process from its own memory."""
    pickled = getattr(c10d, base, None)
    if pickled is not None:
        import pickle

        stacks = [True]

        def read() -> Any:
            try:
                return pickle.loads(pickled(True, stacks[0], False))
            except Exception:
                if not stacks[0]:
                    raise
                stacks[0] = False
                return pickle.loads(pickled(True, False, False))

        return read
    dumped = getattr(c10d, base + "_json", None)
    if dumped is not None:
        return lambda: json.loads(dumped(True, False))
    return None
