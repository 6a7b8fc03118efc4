"""The event stream's types. Standard library only (the hook imports it).

Each family of events lives in its own module; importing this package registers them all.
"""

from perftop.events import capture, comm, core, fleet, probes, stacks, sync, workers  # noqa: F401  (registers the tags)
from perftop.events.base import FORMAT_VERSION, DecodeError, Event, decode, event, registered
from perftop.events.capture import CaptureAsk, CaptureOps, CaptureState
from perftop.events.comm import CollBatch, CollInfo, CollWaiting
from perftop.events.core import (
    Between,
    BetweenOpen,
    Dropped,
    Hello,
    HookClose,
    JobExit,
    JobStart,
    LoaderInfo,
    MonitorStats,
    Note,
    Output,
    SessionStart,
    Step,
    StepGpu,
    TrainThread,
)
from perftop.events.fleet import NodeLink, NodeScope
from perftop.events.probes import (
    GpuSample,
    HostSample,
    ProbeFailed,
    ProbeTick,
    ProcExit,
    ProcInfo,
    ProcSample,
)
from perftop.events.stacks import ObserverStart, StackSample, StallCapture
from perftop.events.sync import SyncBatch, SyncInfo
from perftop.events.workers import WorkerStats

__all__ = [
    "FORMAT_VERSION",
    "Between",
    "CaptureAsk",
    "CaptureOps",
    "CaptureState",
    "CollBatch",
    "CollInfo",
    "CollWaiting",
    "BetweenOpen",
    "DecodeError",
    "Dropped",
    "Event",
    "GpuSample",
    "Hello",
    "HookClose",
    "HostSample",
    "JobExit",
    "JobStart",
    "LoaderInfo",
    "MonitorStats",
    "NodeLink",
    "NodeScope",
    "ObserverStart",
    "Note",
    "Output",
    "ProbeFailed",
    "ProbeTick",
    "ProcExit",
    "ProcInfo",
    "ProcSample",
    "SessionStart",
    "StackSample",
    "StallCapture",
    "Step",
    "StepGpu",
    "SyncBatch",
    "SyncInfo",
    "TrainThread",
    "WorkerStats",
    "decode",
    "event",
    "registered",
]
