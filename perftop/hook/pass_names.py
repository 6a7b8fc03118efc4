"""What names a pass between steps: its site's function and line (``function
(file.py:line)``, a library's file from its package's folder: ``evaluate_step
(ignite/engine/__init__.py:689)``), and for a rollout the environments whose ``step`` it
called (the libraries' classes, looked up in ``sys.modules`` only, never imported), the
first frame outside their methods naming it (:mod:`perftop.hook.pass_meter`)."""

from __future__ import annotations

import sys
from typing import Any

from perftop.codepath import code_file

# Environment classes (module, name), looked up in sys.modules only (never imported).
ENVS = (
    ("gymnasium.core", "Env"),
    ("gymnasium.vector.vector_env", "VectorEnv"),
    ("gym.core", "Env"),
    ("gym.vector.vector_env", "VectorEnv"),
    ("stable_baselines3.common.vec_env.base_vec_env", "VecEnv"),
    ("tianshou.env.venvs", "BaseVectorEnv"),  # its step() calls its workers' envs' own
    ("torchrl.envs.common", "EnvBase"),  # its transforms are modules: forward calls inside
)
MAX_UP = 16  # frames walked out of nested environments' methods to name a rollout
_MAX_NAME = 160


def outside(f: Any, envs: tuple[type, ...]) -> Any:
    """The first frame from ``f`` outward that is no environment's method: where a step
    seen inside another environment's (a wrapper's, torchrl's ``_step`` under its
    ``EnvBase.step``) was called from (the collector's loop, not the wrapper)."""
    for _ in range(MAX_UP):
        if f is None or not isinstance(f.f_locals.get("self"), envs):
            return f
        f = f.f_back
    return f


def env_types() -> tuple[type, ...]:
    """The environment classes of the libraries this process has imported."""
    out = []
    for mod, name in ENVS:
        m = sys.modules.get(mod)
        cls = getattr(m, name, None) if m is not None else None
        if isinstance(cls, type):
            out.append(cls)
    return tuple(out)


_NAMES: dict[Any, str] = {}  # site_name's answers: a pass's site is named once
MAX_NAMES = 256


def site_name(site: Any) -> str:
    """``function (file.py:line)`` for a site from ``gap_site.site`` ((code, instruction)),
    looked up once per site (a module's code has many lines to walk: ~40 µs a pass)."""
    if site is None:
        return ""
    name = _NAMES.get(site)
    if name is None:
        name = _name(site)
        if len(_NAMES) < MAX_NAMES:
            _NAMES[site] = name
    return name


def _name(site: Any) -> str:
    code, lasti = site
    line = code.co_firstlineno
    for start, end, ln in code.co_lines():
        if start <= lasti < end and ln is not None:
            line = ln
            break
    # a library's file from its package's folder (``ignite/engine/__init__.py``: one file,
    # where ``__init__.py`` or ``trainer.py`` named several), the user's by its name: as
    # the monitor names stack frames
    name = f"{code.co_name} ({code_file(code.co_filename)}:{line})"
    return name[:_MAX_NAME]
