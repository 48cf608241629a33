"""The topology package ships the user modules that only a component's method imports."""

import io
import json
import subprocess
import sys
import textwrap
import zipfile

from heron_py.common.package import MANIFEST, build_package, imported_names


def _write(root, files):
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


def test_imported_names_reads_every_depth_and_resolves_relative_imports():
    src = textwrap.dedent("""
        import a.b
        from c import d, e as f
        from . import sib
        from ..up import x
        from .pkg import *
        def method(self):
            import lazy
            if True:
                from deep.er import thing
            importlib.import_module("plug.in")
            __import__("dunder")
            importlib.import_module(computed)
            importlib.import_module(".relative", "top")
    """)
    assert imported_names(src, "top.mod", False) == {
        "a", "a.b", "c", "c.d", "c.e", "top", "top.sib", "lazy", "deep", "deep.er", "deep.er.thing", "top.pkg",
        "plug", "plug.in", "dunder"}
    # in a package's __init__, "." is the package itself; ".." from a top-level module is not
    # a package at all (that import fails at run time) and is left out
    assert imported_names("from . import sib\nfrom .. import no\n", "top", True) == {"top", "top.sib"}
    # the topology file runs as the main module: a relative import in it names nothing
    assert imported_names("from . import sib\nimport os\n", None, False) == {"os"}


def test_modules_imported_only_in_methods_ship_and_import_in_the_container(tmp_path):
    src = tmp_path / "src"
    _write(src, {
        "topo.py": """
            import json
            class Spout:
                def initialize(self):
                    import helper
                    from pkg import sub
                    from pkg.inner import leaf
                    return helper.VALUE + sub.VALUE + leaf.VALUE
            def missing():
                import not_a_module_anywhere
        """,
        "helper.py": """
            VALUE = 1
            def later():
                import lazydep
                return lazydep.VALUE
        """,
        "lazydep.py": "VALUE = 10\n",
        "pkg/__init__.py": "",
        "pkg/sub.py": "from . import sib\nVALUE = 2 + sib.VALUE\n",
        "pkg/sib.py": "VALUE = 100\n",
        "pkg/inner/__init__.py": "",
        "pkg/inner/leaf.py": "VALUE = 1000\n",
        "unrelated.py": "raise SystemExit('never imported, never shipped')\n",
    })
    data = build_package(src / "topo.py", [], [])
    z = zipfile.ZipFile(io.BytesIO(data))
    shipped = sorted(n for n in z.namelist() if n != MANIFEST)
    assert shipped == ["helper.py", "lazydep.py", "pkg/__init__.py", "pkg/inner/__init__.py",
                       "pkg/inner/leaf.py", "pkg/sib.py", "pkg/sub.py", "topo.py"]
    assert json.loads(z.read(MANIFEST))["modules"] == [n for n in shipped if n != "topo.py"]
    # in the container only the package is on the path: the lazy imports resolve there
    out = tmp_path / "container"
    z.extractall(out)
    code = ("import sys; sys.path.insert(0, '.'); import topo, helper; "
            "print(topo.Spout().initialize(), helper.later())")
    run = subprocess.run([sys.executable, "-I", "-c", code], cwd=out, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["1103", "10"]
