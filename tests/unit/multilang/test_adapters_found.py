"""Where a shell subprocess finds heron-py's multilang adapters, and never in place of the
project's own: the PYTHONPATH entry, storm.js written beside a Node.js script only when it
has none, the Node.js files the topology package ships, and a topology whose scripts have
no adapter of their own run under heron-py's multilang driver."""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
import threading
import zipfile
from collections import Counter
from io import BytesIO
from pathlib import Path

import pytest

from heron_py.api.bolt.bolt import Bolt
from heron_py.api.shell import ShellBolt, ShellSpout
from heron_py.api.stream import Grouping
from heron_py.api.topology import TopologyBuilder
from heron_py.common.node_requires import js_requires, node_files, resolve_require
from heron_py.common.package import make_package, shell_files
from heron_py.multilang.adapters import FOLDER, NODE_ADAPTER, PYTHON_ADAPTER
from heron_py.multilang.scripts import missing_adapters, node_script, provide_node_adapter, subprocess_env
from heron_py.testing.inprocess import run_in_process

LOG = logging.getLogger("test")
needs_node = pytest.mark.skipif(shutil.which("node") is None,
                                reason="Node.js is not installed (`node` not on PATH; Debian's nodejs)")


# Python: the PYTHONPATH entry


def test_the_adapters_folder_goes_after_the_pythonpath_entries_already_there():
    assert subprocess_env({})["PYTHONPATH"] == str(FOLDER)
    env = subprocess_env({"PYTHONPATH": f"/a{os.pathsep}/b", "X": "1"})
    assert env == {"PYTHONPATH": f"/a{os.pathsep}/b{os.pathsep}{FOLDER}", "X": "1"}
    assert subprocess_env(env) == env  # once


def _imported_storm(folder: Path, script: str = "run.py", env: dict[str, str] | None = None) -> str:
    out = subprocess.run([sys.executable, script], cwd=folder, env=subprocess_env(env or os.environ),
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_import_storm_finds_heron_pys_unless_the_script_has_its_own(tmp_path):
    (tmp_path / "run.py").write_text("import storm\nprint(storm.__file__)\n")
    assert _imported_storm(tmp_path) == str(PYTHON_ADAPTER)
    (tmp_path / "storm.py").write_text("# the project's own\n")
    assert _imported_storm(tmp_path) == str(tmp_path / "storm.py")
    # one on the user's own PYTHONPATH wins too
    (tmp_path / "storm.py").unlink()
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "storm.py").write_text("")
    assert _imported_storm(tmp_path, env={**os.environ, "PYTHONPATH": str(tmp_path / "lib")}) == str(
        tmp_path / "lib" / "storm.py")


# Node.js: which script, which requires


@pytest.mark.parametrize(("command", "script"), [
    (["node", "spout.js"], "spout.js"),
    ("node --max-old-space-size=64 sub/spout.js x", "sub/spout.js"),
    (["nodejs", "-r", "preload.js", "spout.js"], "spout.js"),
    (["/usr/bin/node20", "spout.cjs"], "spout.cjs"),
    (["./spout.js"], "spout.js"),
    (["node", "-e", "1"], None),
    (["python3", "spout.py"], None),
    (["node", "spout.mjs"], None),
    ([], None),
])
def test_node_script_of_a_command(tmp_path, command, script):
    assert node_script(command, tmp_path) == (tmp_path / script if script else None)


def test_js_requires_takes_relative_literal_requires_outside_comments():
    source = """
        var storm = require('./storm');
        const h = require("../lib/helper.js"), fs = require('fs');
        // var old = require('./old');
        /* require('./older') */
        var url = "http://x//y"; var t = require(`./tmpl`);
        var dyn = require('./' + name); var i = require(`./${name}`);
        require ( './spaced' )
        var again = require('./storm');
    """
    assert js_requires(source) == ["./storm", "../lib/helper.js", "./tmpl", "./spaced"]


def test_resolve_require_as_node_does(tmp_path):
    (tmp_path / "a.js").write_text("")
    (tmp_path / "data.json").write_text("{}")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "package.json").write_text('{"main": "lib/main"}')
    (tmp_path / "pkg" / "lib").mkdir()
    (tmp_path / "pkg" / "lib" / "main.js").write_text("")
    (tmp_path / "dir").mkdir()
    (tmp_path / "dir" / "index.js").write_text("")
    assert resolve_require(tmp_path, "./a") == tmp_path / "a.js"
    assert resolve_require(tmp_path, "./a.js") == tmp_path / "a.js"
    assert resolve_require(tmp_path, "./data") == tmp_path / "data.json"
    assert resolve_require(tmp_path / "dir", "../pkg") == tmp_path / "pkg" / "lib" / "main.js"
    assert resolve_require(tmp_path, "./dir") == tmp_path / "dir" / "index.js"
    assert resolve_require(tmp_path, "./storm") is None


# Node.js: storm.js written beside, only where none is


def test_storm_js_is_written_where_required_and_nowhere_else(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "spout.js").write_text("var storm = require('./storm'); var h = require('./sub/helper');\n")
    (tmp_path / "sub" / "helper.js").write_text("module.exports = require('../storm.js'); require('./storm');\n")
    (tmp_path / "other.js").write_text("// require('./storm')\n")
    assert missing_adapters(tmp_path / "spout.js") == [tmp_path / "storm.js", tmp_path / "sub" / "storm.js"]
    assert missing_adapters(tmp_path / "other.js") == []
    written = provide_node_adapter(["node", "spout.js"], tmp_path, LOG, "test")
    assert written == [tmp_path / "storm.js", tmp_path / "sub" / "storm.js"]
    for f in written:
        assert f.read_bytes() == NODE_ADAPTER.read_bytes()
    assert provide_node_adapter(["node", "spout.js"], tmp_path, LOG, "test") == []  # there now
    assert provide_node_adapter(["node", "other.js"], tmp_path, LOG, "test") == []
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["helper.js", "other.js", "spout.js", "storm.js",
                                                             "storm.js", "sub"]  # no temporary file left


def test_a_projects_own_storm_js_is_kept_byte_for_byte(tmp_path):
    own = b"// the project's own adapter\nmodule.exports = {};\n"
    (tmp_path / "spout.js").write_text("var storm = require('./storm');\n")
    (tmp_path / "storm.js").write_bytes(own)
    before = (tmp_path / "storm.js").stat()
    assert provide_node_adapter(["node", "spout.js"], tmp_path, LOG, "test") == []
    assert (tmp_path / "storm.js").read_bytes() == own
    assert (tmp_path / "storm.js").stat().st_mtime_ns == before.st_mtime_ns
    # a storm/ module folder is the project's too
    (tmp_path / "storm.js").unlink()
    (tmp_path / "storm").mkdir()
    (tmp_path / "storm" / "index.js").write_bytes(own)
    assert provide_node_adapter(["node", "spout.js"], tmp_path, LOG, "test") == []
    assert not (tmp_path / "storm.js").exists()


def test_storm_js_is_not_written_outside_the_working_folder(tmp_path, caplog):
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "spout.js").write_text("var storm = require('../storm');\n")
    with caplog.at_level(logging.WARNING):
        assert provide_node_adapter(["node", "spout.js"], tmp_path / "work", LOG, "task 3") == []
    assert not (tmp_path / "storm.js").exists()
    assert (f"task 3: {tmp_path / 'work' / 'spout.js'} requires {tmp_path / 'storm.js'}, which does not exist; "
            f"heron-py writes its storm.js only inside the working folder {tmp_path / 'work'}") in caplog.text


def test_tasks_starting_together_write_one_whole_storm_js(tmp_path):
    (tmp_path / "spout.js").write_text("var storm = require('./storm');\n")
    results: list[list[Path]] = []
    threads = [threading.Thread(target=lambda: results.append(
        provide_node_adapter(["node", "spout.js"], tmp_path, LOG, "test"))) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(len(r) for r in results) == [0] * 7 + [1]  # one task wrote it
    assert (tmp_path / "storm.js").read_bytes() == NODE_ADAPTER.read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["spout.js", "storm.js"]


# the topology package


def _names(data: bytes) -> set[str]:
    with zipfile.ZipFile(BytesIO(data)) as z:
        return set(z.namelist())


def test_a_node_script_beside_the_topology_ships_what_it_requires(tmp_path):
    (tmp_path / "topo.yaml").write_text("")
    (tmp_path / "randomsentence.js").write_text("var storm = require('./storm');\nrequire('./lib/words');\n")
    (tmp_path / "storm.js").write_text("module.exports = {};\n")
    (tmp_path / "util.js").write_text("")  # beside it: shipped, as Storm ships a jar's resources folder
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "words.js").write_text("module.exports = require('./list.json');\n")
    (tmp_path / "lib" / "list.json").write_text("[]")
    (tmp_path / "lib" / "unused.txt").write_text("")
    assert shell_files(tmp_path / "topo.yaml", {"spout": ["node", "randomsentence.js"]}) == {
        name: (tmp_path / name).resolve() for name in ("randomsentence.js", "storm.js", "util.js", "lib/words.js",
                                                       "lib/list.json")}
    assert node_files(tmp_path / "randomsentence.js") == [
        (tmp_path / n).resolve() for n in ("storm.js", "util.js", "lib/words.js", "lib/list.json")]
    (tmp_path / "resources").mkdir()  # the subprocess runs in resources/ when there is one
    assert set(shell_files(tmp_path / "topo.yaml", {"spout": "node randomsentence.js"})) == {
        "resources/randomsentence.js", "resources/storm.js", "resources/util.js", "resources/lib/words.js",
        "resources/lib/list.json"}


def test_scripts_that_need_heron_pys_adapters_package_without_them(tmp_path):
    """No storm.py or storm.js in the project: the package holds none (the containers' heron-py
    provides them) and making it raises nothing."""
    (tmp_path / "topo.yaml").write_text("")
    (tmp_path / "split.py").write_text("import storm\n")
    (tmp_path / "spout.js").write_text("var storm = require('./storm');\n")
    pkg = make_package(tmp_path / "topo.yaml", [], [], {"split": ["python3", "split.py"],
                                                        "spout": ["node", "spout.js"]})
    assert _names(pkg.data) == {"__heron_package__.json", "topo.yaml", "split.py", "spout.js"}


# under heron-py's multilang driver


class Collect(Bolt):
    def process(self, tup):
        self.ack(tup)


SPOUT_JS = r"""
var storm = require('./storm');
function Sentences() { storm.Spout.call(this); this.n = 0; }
Sentences.prototype = Object.create(storm.Spout.prototype);
Sentences.prototype.nextTuple = function(done) {
    if (this.n < 20) {
        var n = this.n++;
        this.emit({tuple: [n, 'the cow jumped'], id: n}, function(taskIds) {});
    }
    done();
};
new Sentences().run();
"""

SPLIT_PY = """
import storm


class Split(storm.BasicBolt):
    def process(self, tup):
        sid, sentence = tup.values
        for word in sentence.split(" "):
            storm.emit([word, sid])


Split().run()
"""


@needs_node
def test_a_topology_without_adapters_of_its_own_runs_on_heron_pys(tmp_path):
    (tmp_path / "sentences.js").write_text(SPOUT_JS)
    (tmp_path / "split.py").write_text(SPLIT_PY)
    shell = {"heron_py.shell.cwd": str(tmp_path)}
    b = TopologyBuilder("own_adapters")
    spout = ShellSpout.spec(["node", "sentences.js"], outputs=["sid", "sentence"], name="sentences", config=shell)
    b.add_spec(spout)
    split = ShellBolt.spec(["python3", "split.py"], ["word", "sid"], {spout: Grouping.SHUFFLE}, par=2,
                           name="split", config=shell)
    b.add_spec(split)
    b.add_bolt("count", Collect, 1, {split: Grouping.fields("word")})
    result = run_in_process(b, capture=["count"])
    got = Counter(tuple(r.values) for r in result.received["count"])
    assert got == Counter((w, sid) for sid in range(20) for w in ("the", "cow", "jumped"))
    assert (tmp_path / "storm.js").read_bytes() == NODE_ADAPTER.read_bytes()
    assert not (tmp_path / "storm.py").exists()  # Python's comes from the PYTHONPATH, nothing written
