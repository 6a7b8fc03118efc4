"""Checkpoints: the calls that write one, each timed as a save (the tracker's ``saving``
at its start, ``saved`` at its return: a checkpoint is time outside training steps).

- ``torch.save``: torch.save stays torch's own; the private writers it calls are wrapped
  in torch.serialization's namespace: the zip format's file (its opening, serialization,
  end record and close: the whole save but its argument checks), the legacy format's
  serializer.
- safetensors' own ``save_file`` in its module, once the job imports it (HF's and
  accelerate's model weights, written before the torch.save of the optimizer's state;
  ``save_model`` calls it there). Not torch's: nothing a compiler or TorchScript sees. A
  caller that bound ``save_file`` before torch was imported cannot exist
  (safetensors.torch imports torch first).
- The HF Trainer's ``_save_checkpoint``, on its class, once ``transformers.trainer`` is
  imported: the whole checkpoint, not only its files. Its saves' span left out what
  comes before the weights' file (``save_pretrained``'s state dict and weight conversion,
  the config's files) and after the last ``torch.save`` (the state's JSON, the rotation of
  old checkpoints): 5 of the 8 ms of each checkpoint of a small GPT-2, 52 of 65 ms of the
  first, which the next step held.
- A HF model's ``save_pretrained`` (``PreTrainedModel``'s, the Trainer's saves inside it),
  in a loop of the job's own (accelerate's ``no_trainer`` examples): the state dict's
  conversion and the config files around the safetensors file, 93 of the first call's
  95 ms for a tiny GPT-2, were the next step's.
- Lightning's ``Trainer.save_checkpoint`` (``lightning.pytorch`` and ``pytorch_lightning``),
  the same way: under its ``ddp`` strategy rank 0 alone writes the file and the other
  ranks wait for it at the barrier that ends the call, and that wait (as long as the
  write) was the next step's, with no checkpoint on those ranks at all; so was what rank 0
  did before its ``torch.save`` (its ``CheckpointIO``'s own work, the state dicts of
  ``dump_checkpoint``: 0.4-0.8 ms).
- Lightning Fabric's ``Fabric.save``, the same way: rank 0 writes the file, then every rank
  waits at its barrier (rank 1's wait, as long as the write, was its next step's).
- accelerate's ``Accelerator.save_state`` and ``save_model``, the same way: before its
  first file ``save_state`` rotates old checkpoints, waits for every process (with
  automatic naming), gathers the state dicts (FSDP's whole model), runs the job's
  save-state hooks, and only then writes; all of that was the next step's.
- Keras 3's ``save_model`` and ``save_weights`` (``Model.save``, its ``ModelCheckpoint``
  callback): a ``.keras`` zip or an h5 file, no ``torch.save`` at all; its checkpoint after
  each epoch's validation read as that validation's time.
- stable-baselines3's ``save`` and ``save_replay_buffer`` (its ``CheckpointCallback``, in a
  rollout): the model's zip serializes its attributes and system information around the
  parameters' ``torch.save``, and the replay buffer is a pickle; 4-6 of each 7-9 ms read as
  the rollout's.
- torch.distributed.checkpoint's ``save`` (DCP: FSDP2's checkpoint, torchtitan's): its
  private ``_save_state_dict`` in its module's namespace (``dcp.save`` stays torch's own
  object). Each rank's plan is gathered, the global plan scattered, each rank writes its
  items (a ``torch.save`` each), and the coordinator writes the metadata once it has
  every rank's results: the saves' span was 5-18 of each 30-70 ms on two CPU ranks, the
  collectives before and after them the next step's.

Saves inside a save (the Trainer's files inside its checkpoint) are the outer one's: only
the outermost call on a thread is timed.

Ray Train's ``report`` (``ray.train.report``, v2, on its train-function utilities' class)
is timed the same way but is time outside steps of its own kind, ``report``
(``HookState.between``): a barrier of every worker, a checkpoint's upload where it carries
one (a worker that passes none waits there for the others'), and the wait for Ray's
controller to take the last result (up to its 2 s poll), which the next epoch's first step
held, a stalled step where it reached 2 s. The saves right before a report (Ray's guide:
the model saved to a folder, then reported with it) are a checkpoint of their own, up to
the report's start.
"""

from __future__ import annotations

import functools
import threading
import time
from typing import Any

from perftop.hook.importwatch import after_import
from perftop.hook.state import REPORT, HookState

_perf = time.perf_counter
_depth: dict[int, int] = {}  # thread -> saves open on it (nested calls)

# module -> (class, method): a library's whole checkpoint, timed as one save; a class of ""
# is the module's own function, as the library calls it (by the module's name)
WHOLE = (
    ("safetensors.torch", "", "save_file"),
    ("transformers.trainer", "Trainer", "_save_checkpoint"),
    ("transformers.modeling_utils", "PreTrainedModel", "save_pretrained"),
    ("lightning.pytorch.trainer.trainer", "Trainer", "save_checkpoint"),
    ("pytorch_lightning.trainer.trainer", "Trainer", "save_checkpoint"),
    ("lightning.fabric.fabric", "Fabric", "save"),
    ("lightning_fabric.fabric", "Fabric", "save"),
    ("stable_baselines3.common.base_class", "BaseAlgorithm", "save"),
    ("stable_baselines3.common.off_policy_algorithm", "OffPolicyAlgorithm", "save_replay_buffer"),
    ("accelerate.accelerator", "Accelerator", "save_state"),
    ("accelerate.accelerator", "Accelerator", "save_model"),
    # Keras 3's saves, whatever their format (a ``.keras`` zip, ``.weights.h5`` through
    # h5py: no torch.save), as ``Model.save`` and ``save_weights`` call them
    ("keras.src.saving.saving_api", "", "save_model"),
    ("keras.src.saving.saving_api", "", "save_weights"),
    # torch.distributed.checkpoint's (DCP: FSDP2's, torchtitan's): ``dcp.save`` stays
    # torch's own, the private function it calls is wrapped in its module's namespace
    ("torch.distributed.checkpoint.state_dict_saver", "", "_save_state_dict"),
)
# module -> (class, method): a library's report, timed as a report (Ray Train v2's, which
# ``ray.train.report`` calls however it was imported)
_RAY_FN_UTILS = "ray.train.v2._internal.execution.train_fn_utils"
REPORTS = (
    (_RAY_FN_UTILS, "DistributedTrainFnUtils", "report"),
    (_RAY_FN_UTILS, "LocalTrainFnUtils", "report"),
)


def install(state: HookState) -> None:
    import torch.serialization as ser

    for name, wrap in (("_open_zipfile_writer", _zip_saving), ("_legacy_save", _saving)):
        state.wrap(ser, name, wrap)
    for table, wrap in ((WHOLE, _saving), (REPORTS, functools.partial(_saving, report=True))):
        for module, cls_name, method in table:
            after_import(module, functools.partial(_wrap_method, state, cls_name, method, wrap))


def _wrap_method(state: HookState, cls_name: str, method: str, wrap: Any, module: Any) -> None:
    """``cls_name.method`` of ``module`` wrapped; the module's own function where no class
    is named."""
    owner = getattr(module, cls_name, None) if cls_name else module
    if isinstance(owner, type) or not cls_name:
        state.wrap(owner, method, wrap)


def _saving(state: HookState, orig: Any, report: bool = False) -> Any:
    @functools.wraps(orig)
    def save(*args: Any, **kwargs: Any) -> Any:
        t0 = _perf()
        if report and not _depth.get(threading.get_ident()):
            _report_begins(state, t0)
        _opened(state, t0)
        try:
            return orig(*args, **kwargs)
        finally:
            _closed(state, t0)

    return save


def _report_begins(state: HookState, t0: float) -> None:
    """A report begins at ``t0``: the interval outside steps from there is a report
    (``HookState.between``). Where one is open already on the training thread (the saves
    of the checkpoint it reports), the monitor is told a report runs from ``t0``: its
    wait is held to a report's usual length, not its checkpoint's."""
    state.report_t0 = t0
    tr = state.tracker
    try:
        if tr.in_gap and threading.get_ident() == (tr.thread or tr.main_thread):
            state.opened(REPORT, t0)
    except Exception:
        state.internal_error("report")


class _TimedWriter:
    """torch.save's ``with _open_zipfile_writer(f) as z:``: the writer's own context,
    timed from its opening to its close (the file written out)."""

    __slots__ = ("_inner", "_state", "_t0")

    def __init__(self, state: HookState, inner: Any, t0: float) -> None:
        self._state, self._inner, self._t0 = state, inner, t0

    def __enter__(self) -> Any:
        return self._inner.__enter__()

    def __exit__(self, *exc: Any) -> Any:
        try:
            return self._inner.__exit__(*exc)
        finally:
            _closed(self._state, self._t0)


def _zip_saving(state: HookState, orig: Any) -> Any:
    @functools.wraps(orig)
    def open_writer(*args: Any, **kwargs: Any) -> Any:
        t0 = _perf()
        _opened(state, t0)
        try:
            return _TimedWriter(state, orig(*args, **kwargs), t0)
        except BaseException:
            _closed(state, t0)  # the file never opened: the save ends here
            raise

    return open_writer


def _opened(state: HookState, t0: float) -> None:
    """A save began at ``t0``: the checkpoint opens (the tracker's ``saving``), where no
    save is open on this thread already."""
    me = threading.get_ident()
    depth = _depth.get(me, 0)
    _depth[me] = depth + 1
    if depth:
        return
    try:
        state.tracker.saving(t0)
    except Exception:
        state.internal_error("torch.save")


def _closed(state: HookState, t0: float) -> None:
    """The save begun at ``t0`` returned (the tracker's ``saved``), where it was the
    outermost on this thread."""
    me = threading.get_ident()
    depth = _depth.get(me, 1) - 1
    if depth > 0:
        _depth[me] = depth
        return
    _depth.pop(me, None)
    try:
        state.tracker.saved(t0, _perf())
    except Exception:
        state.internal_error("torch.save")
