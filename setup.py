"""The optional compiled build of the hook's hot path; everything else is in pyproject.toml.

``perftop/hook/steps.py`` is plain Python and the one source of the step tracker. When
Cython is there (the build requires it) it is also compiled, with the C types of
``_steps_fast.pxd``, into ``perftop.hook._steps_fast``. ``optional=True``: without a
compiler the build of the extension fails quietly and perftop runs the plain module.

With GCC the extension is built twice: instrumented, then run on the loops of
``perftop/hook/steps_train.py`` (no torch needed), then built again from that profile, which
lays each function out hot path first, the rest after it (``benchmarks/hook_inprocess.py``
measures the difference; ``benchmarks/tracker_lines.py`` counts the lines a step touches). Any failure on that way, or ``PERFTOP_PGO=0``, builds it once,
plainly.
"""

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent
PROFILED = "perftop.hook._steps_fast"
TRAIN_STEPS = "30000"
# The profiled build keeps each function in one piece: GCC 12 (Debian's) gives some blocks
# its own passes add (a return where stores of several paths were merged, a copy on an edge
# where paths join) a count of 0 whatever the profile says, and its hot/cold split then put
# a step's own path partly in the ``.cold`` parts, pages away. Unsplit, the profile still
# orders each function's blocks hot path first: in the tight job a step runs through 61
# lines of the tracker's code on 6 pages, split 73 on 10 (benchmarks/tracker_lines.py).
PROFILED_FLAGS = ["-fprofile-use", "-Wno-missing-profile", "-fno-reorder-blocks-and-partition"]


class ProfiledBuildExt(build_ext):
    """``build_ext`` that builds the step tracker from a profile of its own hot path."""

    def build_extension(self, ext: Extension) -> None:
        if ext.name != PROFILED or os.environ.get("PERFTOP_PGO") == "0" or not self._gcc():
            super().build_extension(ext)
            return
        cflags, lflags = list(ext.extra_compile_args), list(ext.extra_link_args)
        try:
            with tempfile.TemporaryDirectory() as prof:
                where = [f"-fprofile-dir={prof}"]
                self._forced(
                    ext, cflags + where + ["-fprofile-generate"], lflags + ["-fprofile-generate"]
                )
                env = dict(os.environ, PYTHONPATH=str(ROOT))
                subprocess.run(
                    [sys.executable, "-m", "perftop.hook.steps_train",
                     self.get_ext_fullpath(ext.name), TRAIN_STEPS],
                    cwd=ROOT, env=env, check=True, timeout=300, capture_output=True,
                )  # fmt: skip
                self._forced(ext, cflags + where + PROFILED_FLAGS, lflags)
        except Exception as exc:  # any step of the profiled build: the plain one
            print(f"perftop: profiled build failed ({exc}); building plainly", file=sys.stderr)
            self._forced(ext, cflags, lflags)

    def _forced(self, ext: Extension, cflags: list[str], lflags: list[str]) -> None:
        """``ext`` built with these flags, compiled whatever is up to date (an object of
        the instrumented pass must never be linked into another)."""
        ext.extra_compile_args, ext.extra_link_args = cflags, lflags
        force, self.force = self.force, True
        try:
            super().build_extension(ext)
        finally:
            self.force = force

    def _gcc(self) -> bool:
        """Whether the C compiler is GCC (whose profile flags these are)."""
        cc = getattr(self.compiler, "compiler_so", None)
        if not cc:
            return False
        try:
            out = subprocess.run([cc[0], "--version"], capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.SubprocessError):
            return False
        return "Free Software Foundation" in out.stdout and "clang" not in out.stdout


try:
    from Cython.Build import cythonize
except ImportError:  # no Cython: the plain-Python tracker only
    ext_modules = []
else:
    # cythonize regenerates steps.c when steps.py changes, not when only the .pxd (the
    # tracker's fields) or the header does: a stale steps.c built a tracker without them.
    _c = ROOT / "perftop" / "hook" / "steps.c"
    _deps = [ROOT / "perftop" / "hook" / n for n in ("_steps_fast.pxd", "_steps_fast.h")]
    _stale = _c.exists() and any(d.stat().st_mtime > _c.stat().st_mtime for d in _deps)
    ext_modules = cythonize(
        [
            Extension(
                PROFILED,
                ["perftop/hook/steps.py"],
                include_dirs=["perftop/hook"],  # _steps_fast.h
                depends=["perftop/hook/_steps_fast.h", "perftop/hook/_steps_fast.pxd"],
            )
        ],
        compiler_directives={"language_level": 3, "binding": True},
        quiet=True,
        force=_stale,
    )
    for ext in ext_modules:
        ext.optional = True  # cythonize does not carry it over

setup(ext_modules=ext_modules, cmdclass={"build_ext": ProfiledBuildExt})
