"""A typed module (heron_py.hotpath.TYPED) and its Python reference, side by side in one
process: whichever form the package imported, ``reference`` loads the ``.py`` itself and
``typed`` the compiled twin (or skips, saying why), so a test can run both on the same input."""

from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

from heron_py.compiled import extension_file


def _load(name: str, path: Path | str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def reference(module: str) -> ModuleType:
    """The module's ``.py``, whatever form ``module`` was imported in."""
    imported = importlib.import_module(module)
    assert imported.__file__ is not None
    source = Path(imported.__file__).with_name(module.rsplit(".", 1)[1] + ".py")
    return _load(module.rsplit(".", 1)[1] + "_reference", source)


def typed(module: str) -> ModuleType:
    """The module's compiled twin; skips where it is not compiled."""
    ext = extension_file(module)
    if ext is None:
        pytest.skip(f"{module} is not compiled here (no C compiler at installation, or HERON_PY_PURE=1): "
                    f"only the Python reference runs")
    return _load(module, ext)


def implementation(module: str, name: str) -> ModuleType:
    """``reference`` or ``typed``, by name (for parametrized tests)."""
    return reference(module) if name == "reference" else typed(module)
