"""The in-process hook. Standard library only; torch is patched once the job imports it.

Never imports textual, rich, psutil or pynvml (a test checks this in a subprocess). Every
entry point swallows its own errors: the hook may fail to observe, never to train.
"""

from __future__ import annotations

import atexit
import os
import sys

from perftop.hook.sender import debug
from perftop.hook.state import HookState

ENV_SOCKET = "PERFTOP_SOCKET"
ENV_SYNC_SEED = "PERFTOP_SYNC_SEED"  # the sync sampler's seed, shared by a job's ranks

_state: HookState | None = None


def state() -> HookState | None:
    """The installed hook, if any (None when no monitor asked for one)."""
    return _state


def install(socket_path: str) -> HookState:
    """Install the hook in this process (idempotent)."""
    global _state
    if _state is not None:
        return _state
    _state = HookState(socket_path)
    atexit.register(_at_exit)
    os.register_at_fork(after_in_child=_in_forked_child)
    if "torch" in sys.modules and hasattr(sys.modules["torch"], "optim"):
        _on_torch(sys.modules["torch"])
    else:
        from perftop.hook.importwatch import after_import

        after_import("torch", _on_torch)
    return _state


def install_from_env() -> HookState | None:
    """What the bootstrap calls: install only when launched under a perftop monitor."""
    path = os.environ.get(ENV_SOCKET)
    if not path:
        return None
    try:
        return install(path)
    except Exception as exc:
        debug(f"hook not installed: {exc!r}")
        return None


def _on_torch(torch: object) -> None:
    """Arm the hook, once torch is imported: only when a monitor answers on the socket. A
    leaked PERFTOP_SOCKET (a shell started under perftop, a monitor that quit, remote ranks
    with a copied environment) arms nothing: no patch, no sync debug mode, no detector,
    no CUDA events, no thread."""
    st = _state
    if st is None or st.torch_patched:
        return
    if not st.arm():
        return
    st.torch_patched = True
    try:
        from perftop.hook import cuda
        from perftop.hook.torch_patch import patch_torch

        patch_torch(st)
        cuda.attach(st, torch)
    except Exception:
        st.internal_error("patching torch")
    try:
        from perftop.hook import sync

        sync.attach(st, torch)
    except Exception:
        st.internal_error("sync detection")
    try:
        from perftop.hook import workers

        workers.attach(st, torch)
    except Exception:
        st.internal_error("worker figures")
    try:
        from perftop.hook import coll_recorder, collectives, rank_watch

        coll_recorder.prepare_env()  # before the job's first process group: torch reads it then
        rank_watch.attach(st)
        collectives.attach(st)
    except Exception:
        st.internal_error("collectives")


def _in_forked_child() -> None:
    """A ``multiprocessing`` child (fork or forkserver: a hogwild trainer, a pool worker)
    ends with ``os._exit``, which runs no ``atexit`` handler: its last steps would be lost.
    Such a child runs multiprocessing's own exit finalizers, so the exit flush is added to
    them, the way ``atexit`` would run it. Registered through ``register_after_fork``,
    which multiprocessing calls in the child after it clears the finalizers it inherited."""
    mp_util = sys.modules.get("multiprocessing.util")
    if mp_util is None or _state is None:
        return
    try:
        mp_util.register_after_fork(_state, _finalize_at_mp_exit)
    except Exception:
        pass


def _finalize_at_mp_exit(_st: object) -> None:
    mp_util = sys.modules.get("multiprocessing.util")
    if mp_util is not None:
        mp_util.Finalize(None, _at_exit, exitpriority=-100)  # after the job's own


def _at_exit() -> None:
    st = _state
    if st is None or st.sender.pid != os.getpid():
        return
    try:
        if st.captures is not None:
            st.captures.abort()  # before anything else: a running profiler crashes the exit
        st.tracker.flush()
        if st.sync_exit is not None:
            st.sync_exit()  # after the tracker closed a final pass
        if st.comm is not None:
            st.comm(final=True)  # the last records (the training is over)
        st.sender.close()
    except Exception:
        pass
