"""What a pass between steps opened by a forward with grad off spent its time in.

While such a pass is open (first_forward.py's hook watches it), a global forward hook
(torch's public ``register_module_forward_hook(..., always_call=True)``, registered at the
pass's first module call and removed where the pass ends; no torch class or function is
changed) and the pre-hook already there bracket each top-level module call (taken out of
torch's tables while that call runs, its modules unhooked: ``pass_narrow.py``): the pass's
time inside the model's forward calls is measured, the rest is outside them (the loop's
own code between the calls: an environment's steps, a batch's making, ``.item()``).

That share does not name the pass's kind: measured, an RL rollout on CartPole (SB3's PPO)
spends ~75% of its time inside the policy's forward calls, and a small model's
``estimate_loss`` ~45% (its indexing and loss outside the model). What does is what runs
between the calls: where the process has imported an environment library (gymnasium, gym,
stable-baselines3), the first :data:`GAPS` stretches between two top-level forward calls
of each pass are watched by a profile function (``sys.setprofile``, only where none is
set, on the training thread, removed at the next forward call or as soon as it has seen
enough, or after :data:`EVENTS` events) for a call of ``step`` on an environment (an instance of gymnasium's or gym's
``Env`` or ``VectorEnv``, SB3's ``VecEnv``, tianshou's ``BaseVectorEnv`` or torchrl's
``EnvBase``). A pass whose forward calls alternate with
an environment's steps, with no DataLoader batch in it, is a ``rollout`` (SB3's
``evaluate_policy`` is one too: the function names it); any other stays ``eval``. A
site whose pass was a rollout is a pass each time (``rollout_sites``, read by
``gap_regions.region_enter``), even after every step (DQN's few env steps between updates), and a
rollout, not looked into again; a site whose :data:`LOOKS` passes stepped no environment
is not looked into again either (the profile function costs a pass ~0.1-0.2 ms, at most
~10 ms in a call-heavy loop: :data:`EVENTS`).

The pass is named by the user's function that made its first module call (``gap_site.site``:
the first frame outside torch and perftop), e.g. ``collect_rollouts
(stable_baselines3/common/on_policy_algorithm.py:202)``; a rollout by the function that
called the environment's ``step``, the first frame outside every environment's methods (a
step seen inside a wrapper's or torchrl's ``EnvBase.step`` is named by the collector that
called that; a policy's forward called through a library's ``predict``, as SB3's DQN does,
would name ``_predict``; the rollout is ``collect_rollouts``, which steps the env).
The hooks run on the training thread only; another thread's module calls are not the
pass's.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Any

from perftop.hook.pass_names import env_types, outside, site_name

GAPS = 4  # stretches between forward calls looked into per pass
LOOKS = 3  # passes of a site looked into; none stepped an environment: not looked again
# Profile events looked at per pass, at most (a call-heavy loop's cost bound: ~0.3 µs an
# event, so ~10 ms a pass, in at most LOOKS passes of a site that steps no environment).
# RLlib's connector pipelines made ~4,400 events between a forward and the env's step.
EVENTS = 32768
ROLLOUT = "rollout"
MAX_SITES = 64

_perf = time.perf_counter
_cpu = time.thread_time  # the training thread's CPU time (a clock read, the GIL kept)
try:
    from resource import RUSAGE_THREAD as _THREAD
    from resource import getrusage as _usage
except ImportError:  # no per-thread counts (not Linux): all time off the CPU is waiting
    _usage = None  # type: ignore[assignment]
COUNTS_SWITCHES = _usage is not None


def cpu_wall() -> tuple[float, float]:
    """This thread's CPU time, then the wall clock. Reading the CPU clock lets the kernel
    end the thread's time slice right there where one is due (on a loaded host a third of
    such reads wait a few ms for a core; ``getrusage`` and the wall clock do not), so it
    comes first: that wait falls before the wall mark, inside the hook's call (a module's
    forward, a save, a fetch), where the job's own timer around the call has it, never
    after a mark that begins a stretch judged by its time off the CPU (a feeder's wait,
    the idle end of a pass)."""
    c = _cpu()
    return c, _perf()


def switches() -> int:
    """This thread's count of voluntary switches (it blocked: a sleep, a queue, a read, a
    lock), -1 where there is no per-thread count. A system call that keeps the GIL."""
    return _usage(_THREAD).ru_nvcsw if _usage is not None else -1


class PassMeter:
    def __init__(self, register: Any, thread: Any, on_error: Any) -> None:
        self.register = register  # torch's register_module_forward_hook
        self.thread = thread  # callable: the training thread's ident
        self.on_error = on_error
        self.handle: Any = None
        self.depth = 0  # module calls open inside the pass's current forward call
        self.tid = -1  # the training thread's ident while a pass is measured
        self.t_in = 0.0
        self.t_out = self.c_out = 0.0  # wall and CPU time where the last forward returned
        self.n_out = -1  # and the thread's voluntary switches then (-1: not known)
        self.fwd_s = 0.0
        self.site: Any = None
        self.name: Any = None  # the site that names the pass
        self.env_site: Any = None  # the caller of the environment's step(): a rollout's name
        self.batch = False  # a DataLoader batch in the pass
        self.env = False  # an environment's step() between its forward calls
        self.envs: tuple[type, ...] = ()
        self.gaps_left = 0
        self.events_left = 0
        # sites whose pass was a rollout (gaps.py), each with the caller of its env's step
        self.rollout_sites: dict[Any, Any] = {}
        self.plain_sites: dict[Any, int] = {}  # sites of passes looked into: no env stepped
        self.looked = False  # this pass's gaps are looked into
        self.profiling = False
        self.measured = False  # the forward hook was registered for this pass
        self.on_env: Any = None  # called where a pass is first seen stepping an environment
        self.table: Any = None  # torch's table of global forward hooks (pass_narrow.py)

    def exhausted(self, site: Any) -> bool:
        """Whether ``site`` was looked into :data:`LOOKS` times and stepped no environment:
        not looked into again (a rollout's site is one without a look)."""
        return site not in self.rollout_sites and self.plain_sites.get(site, 0) >= LOOKS

    def start(self, t: float, site: Any, name: Any = None) -> None:
        """The pass's first module call began at ``t`` (its pre-hook), made at ``site``,
        named by ``name`` (gap_site.site: the caller of a lambda that made it)."""
        self.t_in, self.fwd_s = t, 0.0
        self.tid = self.thread()
        self.t_out = 0.0  # none returned yet (first_forward.py marks the pass's start)
        self.site = site
        self.name = site if name is None else name
        self.env_site = None
        self.batch = self.env = False
        self.envs = env_types()
        if site in self.rollout_sites:  # looked into before: each of its passes is one
            self.env, self.env_site = True, self.rollout_sites[site]
            self.gaps_left = 0
        elif self.exhausted(site):
            self.gaps_left = 0  # LOOKS of its passes were looked into: no environment
        else:
            self.gaps_left = GAPS if self.envs else 0
        self.looked = self.gaps_left > 0
        self.events_left = EVENTS
        if self.handle is None:
            try:
                self.handle = self.register(self.post, always_call=True)
            except Exception:
                self.on_error("pass forward hook")
        self.measured = self.handle is not None
        self.depth = 1 if self.measured else 0  # (first_forward.py counts calls by it)

    def pre(self, t: float) -> None:
        """A module call inside the pass began at ``t`` (training thread); first_forward.py
        counts those inside a forward call itself (its hook's fast path)."""
        if not self.measured:
            return
        if self.depth == 0:
            if self.profiling:
                self.unprofile()
            self.t_in = t
        self.depth += 1

    def post(self, module: Any, args: Any, out: Any) -> None:
        try:
            if self.depth > 0 and threading.get_ident() == self.tid:
                self.depth -= 1
                if self.depth == 0:
                    self.c_out, self.t_out = cpu_wall()
                    self.n_out = switches()
                    self.fwd_s += self.t_out - self.t_in
                    if self.gaps_left > 0 and not self.env and sys.getprofile() is None:
                        self.gaps_left -= 1
                        self.profiling = True
                        sys.setprofile(self.prof)
        except Exception:
            self.on_error("pass forward hook")

    def prof(self, frame: Any, event: str, arg: Any) -> None:
        """The profile function between two forward calls: an environment's ``step``?"""
        try:
            self.events_left -= 1
            if self.events_left <= 0:
                self.gaps_left = 0  # this pass's budget is spent: no more gaps watched
            if not self.profiling or self.events_left <= 0:
                self.unprofile()
            elif (
                event == "call"
                and frame.f_code.co_name == "step"
                and isinstance(frame.f_locals.get("self"), self.envs)
            ):
                self.env = True
                up = outside(frame.f_back, self.envs)
                self.env_site = (up.f_code, up.f_lasti) if up is not None else None
                self.unprofile()
                if self.on_env is not None and self.site not in self.rollout_sites:
                    self.on_env()  # said at once (a rollout site's pass was, at its open)
        except Exception:
            self.profiling = False
            self.on_error("pass profile")

    def unprofile(self) -> None:
        """Off; removed here where this is the training thread (else at its next event)."""
        self.profiling = False
        if threading.get_ident() == self.thread() and sys.getprofile() == self.prof:
            sys.setprofile(None)

    def lift(self) -> None:
        """The forward hook out of torch's table while a top-level call runs narrowed
        (``pass_narrow``); still this pass's (:meth:`relay` puts it back)."""
        h, table = self.handle, self.table
        if h is not None and isinstance(table, dict):
            table.pop(h.id, None)

    def relay(self) -> None:
        h, table = self.handle, self.table
        if h is not None and isinstance(table, dict):
            table[h.id] = self.post

    def stop(self) -> None:
        h, self.handle = self.handle, None
        self.depth = 0
        self.unprofile()
        if h is not None:
            h.remove()

    def verdict(self, length: float, eval_kind: str) -> tuple[str, str, float]:
        """The pass ended after ``length`` seconds: (its kind, its site, seconds inside
        forward calls; -1 where the hook could not be registered)."""
        measured = self.measured
        self.stop()
        kind = ROLLOUT if self.env and not self.batch else eval_kind
        site = self.site
        if kind == ROLLOUT and site is not None and len(self.rollout_sites) < MAX_SITES:
            self.rollout_sites[site] = self.env_site  # a pass each time, even after every step
        else:
            self._plain_look()
        fwd = min(self.fwd_s, length) if measured else -1.0
        named = self.env_site if kind == ROLLOUT and self.env_site is not None else self.name
        return kind, site_name(named), fwd

    def dismiss(self) -> None:
        """A candidate that was no pass (pass_mode.py: training came first): stopped, and
        a look at its site counted where it was looked into."""
        self.stop()
        self._plain_look()

    def _plain_look(self) -> None:
        site = self.site
        if self.looked and not self.env and site is not None and self._room(site):
            self.plain_sites[site] = self.plain_sites.get(site, 0) + 1

    def _room(self, site: Any) -> bool:
        return site in self.plain_sites or len(self.plain_sites) < MAX_SITES
