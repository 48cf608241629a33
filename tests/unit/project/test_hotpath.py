"""The compiled hot path (heron_py.hotpath): what installation compiled, and the switch back to
the Python source."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from heron_py.compiled import extension_file
from heron_py.hotpath import MODULES, _SourceFirst

_ORIGINS = "import importlib, json; print(json.dumps({m: importlib.import_module(m).__file__ for m in %r}))"


def _origins(pure: str) -> dict[str, str]:
    env = {**os.environ, "HERON_PY_PURE": pure}
    out = subprocess.run([sys.executable, "-c", _ORIGINS % (MODULES,)], env=env, capture_output=True, text=True,
                         check=True).stdout
    return dict(json.loads(out))


def _compiler() -> str | None:
    """Why this machine cannot compile an extension module, or None when it can."""
    cc = (sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(cc) is None:
        return f"no C compiler ({cc})"
    if not (Path(sysconfig.get_paths()["include"]) / "Python.h").is_file():
        return "no Python.h (python3-dev)"
    return None


def test_every_listed_module_is_a_source_file_of_the_tree():
    for m in MODULES:
        assert (Path(__file__).resolve().parents[3] / (m.replace(".", "/") + ".py")).is_file(), m


def test_with_the_switch_every_listed_module_is_imported_from_its_source():
    assert all(path.endswith(".py") for path in _origins("1").values())


def test_where_a_compiler_is_every_listed_module_was_compiled_and_is_imported_compiled():
    why = _compiler()
    if why:
        pytest.skip(f"{why}: installation keeps the pure-Python modules")
    missing = [m for m in MODULES if extension_file(m) is None]
    assert missing == [], "not compiled at installation (pip install -e . compiles them)"
    origins = _origins("")
    assert {m: origins[m] for m in MODULES} == {m: str(extension_file(m)) for m in MODULES}


def test_the_finder_leaves_every_other_module_to_the_ordinary_search():
    finder = _SourceFirst(pure=True)
    assert finder.find_spec("heron_py.runtime.hooks", None) is None
    assert finder.find_spec("json", None) is None


@pytest.mark.parametrize(("source_newer", "pure", "checkout", "imported"),
                         [(False, False, True, "extension"), (True, False, True, "source"),
                          (False, True, True, "source"), (True, False, False, "extension"),
                          (True, True, False, "source")])
def test_an_extension_older_than_its_source_is_passed_over_in_a_checkout(tmp_path, source_newer, pure, checkout,
                                                                          imported):
    """After an edit, a checkout or a pull without reinstalling, the old compiled code must not
    run. An installed copy (no setup.py beside its packages) is never edited, and pip writes an
    extension and its source in the wheel's order, a few ms apart: its extension runs."""
    ext = extension_file("stream_manager.routing")
    if ext is None:
        pytest.skip("stream_manager.routing is not compiled here")
    (tmp_path / "stream_manager").mkdir()
    if checkout:
        (tmp_path / "setup.py").write_text("")
    copy_ext = tmp_path / "stream_manager" / ext.name
    copy_src = tmp_path / "stream_manager" / "routing.py"
    shutil.copy(ext, copy_ext)
    shutil.copy(Path(ext).with_name("routing.py"), copy_src)
    os.utime(copy_ext, (1_000_000, 1_000_000))
    os.utime(copy_src, (2_000_000 if source_newer else 1_000_000,) * 2)
    spec = _SourceFirst(pure=pure).find_spec("stream_manager.routing", [str(tmp_path / "stream_manager")])
    assert spec is not None
    assert spec.origin == str(copy_src if imported == "source" else copy_ext)


def test_a_typed_module_is_stale_against_its_cython_twin(tmp_path):
    """A module of TYPED is built from its .pyx: an edit of the .pyx since the build passes the
    extension over; the .py (the reference) does not date it."""
    ext = extension_file("heron_py.acking.roots")
    if ext is None:
        pytest.skip("heron_py.acking.roots is not compiled here")
    pkg = tmp_path / "heron_py" / "acking"
    pkg.mkdir(parents=True)
    (tmp_path / "setup.py").write_text("")
    copy_ext = pkg / ext.name
    shutil.copy(ext, copy_ext)
    for name in ("roots.py", "roots.pyx"):
        shutil.copy(Path(ext).with_name(name), pkg / name)
    finder = _SourceFirst(pure=False)
    os.utime(copy_ext, (1_000_000, 1_000_000))
    os.utime(pkg / "roots.pyx", (1_000_000, 1_000_000))
    os.utime(pkg / "roots.py", (2_000_000, 2_000_000))
    spec = finder.find_spec("heron_py.acking.roots", [str(pkg)])
    assert spec is not None and spec.origin == str(copy_ext)
    os.utime(pkg / "roots.pyx", (2_000_000, 2_000_000))
    spec = finder.find_spec("heron_py.acking.roots", [str(pkg)])
    assert spec is not None and spec.origin == str(pkg / "roots.py")
