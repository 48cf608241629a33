"""User code reaches every container through the topology package, not a shared directory:
components from the topology file itself, from a module beside it, and from a package on the
submitter's PYTHONPATH (which the containers do not get)."""

import os
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
