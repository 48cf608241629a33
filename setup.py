"""Compiles the hot-path modules that heron_py/hotpath.py lists with Cython, from their unchanged
.py files, into extension modules beside them (an editable install puts them in the tree). The
.py files ship as well and are the fallback: where Cython or a C compiler is missing, or with
HERON_PY_PURE=1 set at install, nothing is compiled and heron-py runs as pure Python. Everything
else about the package is in pyproject.toml."""

from __future__ import annotations

import os
import runpy
import sys
from typing import Any

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


class OptionalBuildExt(build_ext):
    """A module that cannot be compiled here (no C compiler, no Python headers, a compiler
    error) stays pure Python: a warning, and its .py file is what gets imported."""

    def build_extensions(self) -> None:
        self.check_extensions_list(self.extensions)
        built = []
        for ext in self.extensions:
            try:
                self.build_extension(ext)
            except Exception as e:  # any failure leaves the module to its .py file
                print(f"heron-py: {ext.name} not compiled ({type(e).__name__}: {e}); it runs as pure Python",
                      file=sys.stderr)
            else:
                built.append(ext)
        self.extensions[:] = built


def extensions() -> list[Any]:
    # the list and the switch from heron_py/hotpath.py, read before heron-py is installed
    hotpath = runpy.run_path(os.path.join(os.path.dirname(os.path.abspath(__file__)), "heron_py", "hotpath.py"))
    if hotpath["pure_requested"]():
        return []
    try:
        from Cython.Build import cythonize
    except ImportError:
        print("heron-py: Cython is not installed; installing the pure-Python modules only", file=sys.stderr)
        return []
    exts = [Extension(m, [m.replace(".", "/") + ".py"]) for m in hotpath["MODULES"]]
    # annotation_typing off: annotations are not checked at run time, as in Python
    directives = {"language_level": 3, "annotation_typing": False, "binding": True}
    return list(cythonize(exts, build_dir="build/cython", compiler_directives=directives, quiet=True))


setup(ext_modules=extensions(), cmdclass={"build_ext": OptionalBuildExt})
