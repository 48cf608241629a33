"""Which form each hot-path module (heron_py.hotpath.MODULES) is imported in here: compiled by
Cython at installation, or its Python source. ``python -m heron_py.compiled`` prints it."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
from pathlib import Path

import heron_py
from heron_py.hotpath import MODULES, PURE_ENV, is_extension, pure_requested


def form(module: str) -> str:
    """"compiled" or "pure": the form in which ``module`` is (or would be) imported here."""
    loaded = sys.modules.get(module)
    origin = getattr(loaded, "__file__", None) if loaded is not None else None
    if origin is None:
        spec = importlib.util.find_spec(module)
        origin = spec.origin if spec is not None else None
    return "compiled" if origin and is_extension(origin) else "pure"


def extension_file(module: str) -> Path | None:
    """The compiled file of ``module`` installed beside its source, whether or not this
    process imports it (HERON_PY_PURE=1); None where it was not compiled."""
    root = Path(heron_py.__file__).resolve().parent.parent  # heron_py, instance, stream_manager
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        path = root / (module.replace(".", "/") + suffix)
        if path.is_file():
            return path
    return None


def forms() -> dict[str, str]:
    return {m: form(m) for m in MODULES}


def main() -> None:
    result = forms()
    for module, how in result.items():
        ext = extension_file(module)
        why = ""
        if how == "pure" and ext is not None and not pure_requested():
            why = "  (its extension module is older than its source in this checkout: pip install -e . rebuilds it)"
        print(f"{how:<9} {module}{why}")
    compiled = sum(how == "compiled" for how in result.values())
    switch = f" ({PURE_ENV}=1)" if pure_requested() else ""
    print(f"{compiled} of {len(result)} hot-path modules compiled{switch}")


if __name__ == "__main__":
    main()
