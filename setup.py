"""The optional compiled build of the hook's hot path; everything else is in pyproject.toml.

``perftop/hook/steps.py`` is plain Python and the one source of the step tracker. When
Cython is there (the build requires it) it is also compiled, with the C types of
``_steps_fast.pxd``, into ``perftop.hook._steps_fast``. ``optional=True``: without a
compiler the build of the extension fails quietly and perftop runs the plain module.
"""

from setuptools import Extension, setup

try:
    from Cython.Build import cythonize
except ImportError:  # no Cython: the plain-Python tracker only
    ext_modules = []
else:
    ext_modules = cythonize(
        [
            Extension(
                "perftop.hook._steps_fast",
                ["perftop/hook/steps.py"],
                include_dirs=["perftop/hook"],  # _steps_fast.h
                depends=["perftop/hook/_steps_fast.h", "perftop/hook/_steps_fast.pxd"],
            )
        ],
        compiler_directives={"language_level": 3, "binding": True},
        quiet=True,
    )
    for ext in ext_modules:
        ext.optional = True  # cythonize does not carry it over

setup(ext_modules=ext_modules)
