"""The optional C fast path of the hook (perftop.hook._speedups); everything else is in
pyproject.toml. ``optional=True``: without a compiler or Python headers the build of the
extension fails quietly and perftop installs with the pure-Python hook."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "perftop.hook._speedups",
            sources=[
                "perftop/hook/_speedups.c",
                "perftop/hook/_tracker.c",
                "perftop/hook/_wrappers.c",
            ],
            depends=["perftop/hook/_tracker.h"],
            optional=True,
        )
    ]
)
