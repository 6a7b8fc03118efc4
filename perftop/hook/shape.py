"""The step tracker's shape, as its rare paths (``steps_cold``, ``gaps``) see it.

``steps.py`` is compiled with the C declarations of ``_steps_fast.pxd``; this protocol names
the same attributes with their Python types, so the cold paths are type-checked against the
real tracker. ``tests/test_tracker_shape.py`` checks that the two lists agree and that every
attribute the tracker's modules set is declared in both.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol


class Tracker(Protocol):
    # callbacks and hooks (``object`` in the .pxd)
    opt_pre_hook: Any
    opt_post_hook: Any
    emit: Callable[[tuple[Any, ...]], None]
    on_close: Callable[[int, float], None] | None
    on_step: Callable[[int, float], int | None] | None
    on_fetched: Callable[..., None] | None
    on_settle: Callable[[], None] | None
    on_error: Callable[[str], None] | None
    on_between: Callable[..., None] | None  # kind, t0, length[, site, forward_s]
    on_open: Callable[[str, float], None] | None
    on_arm: Callable[[], None] | None
    watching: Callable[[float], bool | None] | None
    on_closure: Callable[[], None] | None
    on_iter: Callable[[Any], Any] | None
    on_flush: Callable[[], None] | None
    flush_at: float
    clock: Callable[[], float]
    # ints
    mode: int
    closure_depth: int
    index: int
    step_hook_at: int
    thread: int
    fetch_thread: int
    main_thread: int
    # flags
    running: bool
    settled: bool
    has_fetch: bool
    held_fetch: bool
    has_bwd: bool
    in_gap: bool
    gap_eval: bool
    pend: bool
    pend_got: bool
    blind: bool
    bwd_seen: bool
    multi_bwd: bool
    timing: bool
    # times (seconds)
    start: float
    opt_t0: float
    closure_s: float
    last_end: float
    data: float
    bwd: float
    opt: float
    hole: float
    fwd_wait: float
    gap_t0: float
    gap_t1: float
    gap_seen: float
    save_s: float
    save_t0: float
    save_end: float
    save_alone: bool
    pend_t0: float
    pend_t1: float
    batch_t: float  # where a pass's last batch returned (0: none yet), and the
    batch_c: float  # training thread's CPU time then (gaps.eval_batch, at_exit)
    batch_site: Any  # where such a pass's first module call was made (first_forward.py)
    save_w: float  # bytes the training thread had written when its last save returned
    save_c: float  # (-1: unknown), and its CPU time then (gap_bounds.wrote_after_save)
    save_q: float  # ... and its wait for a core so far (gap_bounds.run_delay; -1: unknown)
    pre_end: float  # where a loader that ended before any training ended (-1: none)
    # objects
    region: Any
    cand: Any  # (a forward's hook, retro) whose pass the pending batch may open
    ng_sites: dict[Any, tuple[int, int, bool]]
    primary: Any  # a weak reference to the primary optimizer, or None
    mark: Any
    in_opt: Any
    phases: dict[str, float] | None
    fetch_loader: Any
    pend_loader: Any
    eval_loader: Any  # the last loader not of training whose batches were an evaluation's
    pend_site: Any  # the loop that fetched the pending batch (gap_site.fetch_site)
    grad_enabled: Any
    train_last: Any
    last_it: tuple[Any, ...] | None
    held: list[tuple[Any, ...]]
    train_loaders: set[Any]
    # the ring the sender reads steps from (ring.py)
    ring_cap: int
    ring_r: int
    ring_w: int
    ring_pid: int
    ring_off: float
    ring_buf: Any
    ring: Any  # compiled: a C pointer to ring_buf's bytes
    ring_phases: dict[int, dict[str, float]]

    def close(self, t: float) -> None: ...

    def push(self, index: float, t0: float, t1: float, data: float, bwd: float, opt: float,
             phases: Any, source: float) -> None: ...  # fmt: skip

    def active(self) -> bool: ...

    def lazy_close(self, t: float) -> None: ...
