"""Print ``name==floor`` for the named dependencies of pyproject.toml (CI installs them to
test the lowest versions perftop allows): ``python scripts/dependency_floors.py NAME...``."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import tomllib


def floors(names: list[str]) -> list[str]:
    text = (Path(__file__).resolve().parent.parent / "pyproject.toml").read_bytes().decode()
    deps = tomllib.loads(text)["project"]["dependencies"]
    out = []
    for d in deps:
        m = re.fullmatch(r"([A-Za-z0-9_.-]+)\s*>=\s*([0-9][0-9.]*)", d.split(";")[0].strip())
        if m and m[1] in names:
            out.append(f"{m[1]}=={m[2]}")
    missing = set(names) - {x.split("==")[0] for x in out}
    if missing:
        raise SystemExit(f"no >= floor in pyproject.toml for: {', '.join(sorted(missing))}")
    return out


if __name__ == "__main__":
    print(" ".join(floors(sys.argv[1:])))
