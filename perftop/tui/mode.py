"""Whose session the app shows (the app and its header both read it)."""

from __future__ import annotations

from typing import Literal

# "" a job perftop runs; "viewer" a session attached read-only; "observer" a bare process
AppMode = Literal["", "viewer", "observer"]
