"""User code reaches every container through the topology package, not a shared directory:
components from the topology file itself, from a module beside it, and from a package on the
submitter's PYTHONPATH (which the containers do not get)."""

import os
import re
import subprocess
import sys
import textwrap

import pytest

from heron_py.testing.local import kill_local, read_capture

pytestmark = pytest.mark.integration


def test_components_from_file_beside_and_pythonpath_run_in_containers(heron_home, tmp_path):
    topo_dir, lib = tmp_path / "topo", tmp_path / "lib"
    (lib / "mylib").mkdir(parents=True)
    topo_dir.mkdir()
    (lib / "mylib" / "__init__.py").write_text("")
    (lib / "mylib" / "shout.py").write_text(textwrap.dedent('''
        from heronpy.api.bolt.bolt import Bolt

        class Shout(Bolt):
            outputs = ["word"]

            def process(self, tup):
                self.emit([tup.values[0].upper() + "!"])
    '''))
    (topo_dir / "beside.py").write_text(textwrap.dedent('''
        from heronpy.api.spout.spout import Spout

        class Letters(Spout):
            outputs = ["word"]

            def initialize(self, config, context):
                self.todo = list("abc")

            def next_tuple(self):
                if self.todo:
                    self.emit([self.todo.pop(0)])
    '''))
    (topo_dir / "my_topology.py").write_text(textwrap.dedent('''
        import sys
        from heronpy.api.bolt.bolt import Bolt
        from heronpy.api.topology import TopologyBuilder
        from beside import Letters
        from mylib.shout import Shout

        class Sink(Bolt):
            outputs = []

            def process(self, tup):
                pass

        if __name__ == "__main__":
            b = TopologyBuilder(sys.argv[1])
            s = b.add_spout("letters", Letters, par=1)
            sh = b.add_bolt("shout", Shout, par=2, inputs=[s])
            b.add_bolt("sink", Sink, par=1, inputs=[sh])
            b.set_config({"topology.stmgrs": 2})
            b.build_and_submit()
    '''))
    capture = heron_home / "capture"
    env = dict(os.environ, HERON_PY_HOME=str(heron_home), PYTHONPATH=str(lib))
    p = subprocess.run([sys.executable, "-m", "heron_py.cli.main", "submit", "local",
                        "--config-property", f"heron_py.testing.capture.dir={capture}",
                        "--config-property", "heron_py.testing.capture.components=sink",
                        str(topo_dir / "my_topology.py"), "pkgtest"],
                       env=env, cwd=str(tmp_path), capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    try:
        import time

        deadline = time.monotonic() + 30
        while len(read_capture(capture, ["sink"])["sink"]) < 3 and time.monotonic() < deadline:
            time.sleep(0.2)
        got = sorted(r["values"][0] for r in read_capture(capture, ["sink"])["sink"])
        assert got == ["A!", "B!", "C!"]
        # the package holds the user's modules (not site-packages, not heron-py itself)
        import io
        import json
        import zipfile

        from heron_py.state import LocalFsStateManager

        z = zipfile.ZipFile(io.BytesIO(LocalFsStateManager(heron_home).get_package("pkgtest")))
        manifest = json.loads(z.read("__heron_package__.json"))
        assert manifest["main"] == "my_topology.py" and manifest["argv"] == ["pkgtest"]
        assert sorted(manifest["modules"]) == ["beside.py", "mylib/__init__.py", "mylib/shout.py"]
    finally:
        kill_local(heron_home, "pkgtest")


def test_bad_topology_is_refused_at_submit_with_one_clear_error(heron_home, tmp_path):
    f = tmp_path / "bad.py"
    f.write_text(textwrap.dedent('''
        from heronpy.api.bolt.bolt import Bolt
        from heronpy.api.spout.spout import Spout
        from heronpy.api.stream import Grouping
        from heronpy.api.topology import TopologyBuilder

        class S(Spout):
            outputs = ["word"]

        class C(Bolt):
            outputs = []

        b = TopologyBuilder("bad")
        s = b.add_spout("s", S, par=1)
        b.add_bolt("c", C, par=1, inputs={s: Grouping.fields("wrd")})
        b.build_and_submit()
    '''))
    env = dict(os.environ, HERON_PY_HOME=str(heron_home))
    p = subprocess.run([sys.executable, "-m", "heron_py.cli.main", "submit", "local", str(f)],
                       env=env, capture_output=True, text=True, timeout=60)
    assert p.returncode == 1
    assert p.stderr == ("heron-py: error: topology 'bad': bolt 'c' input from 's' stream 'default' groups on "
                        "field 'wrd', which that stream does not declare (declared fields: ['word'])\n")
    assert p.stdout == ""
    assert not (heron_home / "state" / "topologies" / "bad").exists()


# --- issue 36: ship what the topology needs (tests/shipping/ holds the projects) ---

SHIPPING = __import__("pathlib").Path(__file__).resolve().parents[1] / "shipping"


def _cli(home, *args, env=None, cwd=None):
    full = dict(os.environ, HERON_PY_HOME=str(home), **(env or {}))
    return subprocess.run([sys.executable, "-m", "heron_py.cli.main", *args], env=full, cwd=cwd,
                          capture_output=True, text=True, timeout=120)


def _package_names(home, name):
    import io
    import zipfile

    from heron_py.state import LocalFsStateManager

    return set(zipfile.ZipFile(io.BytesIO(LocalFsStateManager(home).get_package(name))).namelist())


def test_a_package_reached_through_an_extended_path_ships_whole_and_runs(heron_home, tmp_path):
    from heron_py.testing.local import run_local

    base = SHIPPING / "dynamic_path"
    pythonpath = f"{base / 'lib_a'}{os.pathsep}{base / 'lib_b'}"
    run = run_local(base / "topo" / "window_size_topology.py", ["dynpath"], home=heron_home, capture=["sink"],
                    env={"PYTHONPATH": pythonpath}, keep_running=True,
                    until=lambda got: len(got["sink"]) >= 3)
    try:
        # the module imported by a computed name and the data file came from the second folder
        assert sorted(r["values"][0] for r in run.received["sink"]) == ["alpha-shipped", "beta-shipped",
                                                                          "gamma-shipped"]
        names = _package_names(heron_home, "dynpath")
        assert {"heron/__init__.py", "heron/examples/src/python/spout.py", "heron/examples/src/python/suffix.py",
                "heron/examples/src/python/words.txt"} <= names
        assert re.search(r"^package: \d+ files, [0-9.]+ KB \([0-9.]+ KB zipped\)$", run.submit_output, re.M)
    finally:
        kill_local(heron_home, "dynpath")


@pytest.fixture(scope="module")
def fastcount_target(tmp_path_factory):
    """fastcount (a C extension module) installed with pip install --target, as on a cluster."""
    import shutil

    if shutil.which("cc") is None and shutil.which("gcc") is None:
        pytest.skip("no C compiler to build the extension module")
    root = tmp_path_factory.mktemp("fastcount")
    shutil.copytree(SHIPPING / "extlib", root / "src")  # the build writes beside its sources
    p = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--target", str(root / "target"),
                        "--no-build-isolation", "--no-deps", "--no-index", str(root / "src")],
                       capture_output=True, text=True, timeout=180)
    if p.returncode != 0:
        pytest.skip(f"cannot build the extension module here: {p.stderr.strip()[-300:]}")
    return root / "target"


def test_an_extension_module_of_a_library_on_pythonpath_ships_and_loads_in_the_container(heron_home,
                                                                                       fastcount_target):
    from heron_py.testing.local import run_local

    run = run_local(SHIPPING / "ext_topology" / "topology.py", ["extmod"], home=heron_home, capture=["sink"],
                    env={"PYTHONPATH": str(fastcount_target)}, keep_running=True,
                    until=lambda got: len(got["sink"]) >= 3)
    try:
        rows = sorted(tuple(r["values"]) for r in run.received["sink"])
        assert [n for n, _ in rows] == [3, 6, 9]
        # loaded from the unpacked package in the container, not from the submitter's folder
        assert all(w.startswith(str(heron_home)) and w.endswith(".so") for _, w in rows), rows
        names = _package_names(heron_home, "extmod")
        assert any(n.startswith("fastcount/_speedup") and n.endswith(".so") for n in names), names
        assert "fastcount-1.0.dist-info/METADATA" in names and "fastcount-1.0.dist-info/RECORD" in names
    finally:
        kill_local(heron_home, "extmod")


def _flux_beside(dest):
    """tests/shipping/flux_beside with Storm's storm.py adapter beside the scripts (kept once, in
    tests/multilang, as Apache ships it)."""
    import shutil

    shutil.copytree(SHIPPING / "flux_beside", dest)
    shutil.copy(SHIPPING.parent / "multilang" / "storm.py", dest / "storm.py")
    return dest


def test_flux_shell_scripts_beside_the_yaml_ship_and_run(heron_home, tmp_path):
    from heron_py.testing.local import run_local

    vocabulary = {w for s in ("the cow jumped over the moon", "an apple a day keeps the doctor away",
                              "four score and seven years ago", "snow white and the seven dwarfs",
                              "i am at two with nature") for w in s.split()}
    run = run_local(_flux_beside(tmp_path / "flux") / "multilang.yaml", home=heron_home, capture=["count"],
                    keep_running=True, until=lambda got: len(got["count"]) >= 10)
    try:
        assert {r["values"][0] for r in run.received["count"]} <= vocabulary
        assert {"sentences.py", "splitsentence.py", "storm.py", "multilang.yaml"} <= _package_names(heron_home,
                                                                                                     "flux-beside")
    finally:
        kill_local(heron_home, "flux-beside")


def test_a_flux_shell_script_in_neither_place_is_one_error_at_dry_run_and_submit(heron_home, tmp_path):
    _flux_beside(tmp_path / "flux")
    text = (tmp_path / "flux" / "multilang.yaml").read_text().replace('"splitsentence.py"', '"nothere.py"')
    (tmp_path / "flux" / "splitsentence.py").unlink()
    (tmp_path / "flux" / "multilang.yaml").write_text(text)
    tmp_path = tmp_path / "flux"
    error = (f"heron-py: error: component 'splitsentence': its command ['python3', 'nothere.py'] runs nothere.py, "
             f"which is neither in {tmp_path / 'resources' / 'nothere.py'} nor beside the topology file at "
             f"{tmp_path / 'nothere.py'}; expected the script in one of them\n")
    for extra in (["--dry-run"], []):
        p = _cli(heron_home, "submit", "local", str(tmp_path / "multilang.yaml"), *extra)
        assert (p.returncode, p.stderr, p.stdout) == (1, error, "")
    assert not (heron_home / "state" / "topologies" / "flux-beside").exists()


def test_a_user_module_named_like_an_engine_package_is_refused(heron_home):
    where = SHIPPING / "clash" / "instance.py"
    p = _cli(heron_home, "submit", "local", str(SHIPPING / "clash" / "topology.py"))
    assert p.returncode == 1
    assert p.stderr == (f"heron-py: error: {where}: a user module named 'instance', like heron-py's own top-level "
                        f"package 'instance' (heron_py, heronpy, topology_master, stream_manager, instance, "
                        f"metrics_manager, proto are the engine's); rename it (e.g. 'my_instance') and its imports\n")


def test_a_package_over_the_limit_is_refused_listing_its_largest_entries(heron_home, tmp_path):
    topo = tmp_path / "topo.py"
    topo.write_text((SHIPPING / "clash" / "topology.py").read_text().replace("import instance  # noqa: F401  "
                                                                             "(the user's instance.py beside this "
                                                                             "file)\n", ""))
    (tmp_path / "resources").mkdir()
    (tmp_path / "resources" / "big.bin").write_bytes(b"x" * 300_000)
    (tmp_path / "resources" / "small.txt").write_bytes(b"y" * 2048)
    p = _cli(heron_home, "submit", "local", "--config-property", "heron_py.package.max.bytes=100000", str(topo),
             "--dry-run")
    size = topo.stat().st_size
    assert p.returncode == 1, p.stdout
    manifest = len(__import__("json").dumps({"main": "topo.py", "argv": [], "workdir": "resources", "package": None,
                                             "modules": []}))
    total = 300_000 + 2048 + size + manifest
    from heron_py.common.package import human_bytes

    assert p.stderr == (f"heron-py: error: the topology package is {human_bytes(total)} in 4 files, over "
                        f"heron_py.package.max.bytes (97.7 KB); largest: resources/big.bin (293.0 KB), "
                        f"resources/small.txt (2.0 KB), topo.py ({human_bytes(size)}), __heron_package__.json "
                        f"({manifest} bytes); move data out of the shipped folders or raise "
                        f"heron_py.package.max.bytes\n")
