"""How sure a Chrome trace track's name is: a later, surer source renames it (shared by the
trace, :mod:`perftop.export.chrome`, and its counter tracks, :mod:`perftop.export.counters`)."""

from __future__ import annotations

NAME_PID, NAME_PROGRAM, NAME_ROLE = 0, 1, 2
