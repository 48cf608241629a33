"""Storm projects as Maven builds them, whose sources hold no storm.py or storm.js (Storm's jars
bring those): Flux shell components that ``import storm`` or ``require('./storm')`` run on
heron-py's own adapters on the local scheduler, while a project's own adapter is kept and
used; Storm's Flux multilang example (multilang.yaml, randomsentence.js with Storm's storm.js
beside it) runs; examples/storm runs without an adapter of its own; a dry run passes such a
project and refuses a Node.js script that is not there."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from heron_py.common.container_layout import TopologyPaths
from heron_py.multilang.adapters import NODE_ADAPTER
from heron_py.testing import run_local
from heron_py.testing.local import kill_local
from tests.integration.test_shell_components import by_source, expected_words
from tests.support import run_cli

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(shutil.which("node") is None,
                                 reason="Node.js is not installed (`node` not on PATH; Debian's nodejs)")]

ROOT = Path(__file__).resolve().parents[2]
MULTILANG = ROOT / "tests" / "multilang"
STORM_FLUX = MULTILANG / "storm_flux"
STORM_SENTENCES = ("the cow jumped over the moon", "an apple a day keeps the doctor away",
                   "four score and seven years ago", "snow white and the seven dwarfs", "i am at two with nature")

# the Maven project: src/main/resources/ is the jar's root, its resources/ the shell scripts'
# folder. Scripts in resources/ have no adapter beside them; those in resources/own/ have the
# project's own (Storm's, which writes a marker file when loaded).
FLUX = """\
name: "maven-multilang"
config:
  topology.workers: 2
  topology.acker.executors: 1
  test.sentences: 60
spouts:
  - id: "spout"
    className: "org.apache.storm.flux.wrappers.spouts.FluxShellSpout"
    constructorArgs: [["node", "sentences.js"], ["sid", "sentence"]]
  - id: "spout_own"
    className: "org.apache.storm.flux.wrappers.spouts.FluxShellSpout"
    constructorArgs: [["node", "own/sentences.js"], ["sid", "sentence"]]
bolts:
  - id: "split"
    className: "org.apache.storm.flux.wrappers.bolts.FluxShellBolt"
    constructorArgs: [["python3", "split.py"], ["word", "sid", "pos"]]
    parallelism: 2
  - id: "split_own"
    className: "org.apache.storm.flux.wrappers.bolts.FluxShellBolt"
    constructorArgs: [["python3", "own/split.py"], ["word", "sid", "pos"]]
  - id: "count"
    className: "org.apache.storm.testing.TestWordCounter"
    parallelism: 2
streams:
  - {from: "spout", to: "split", grouping: {type: SHUFFLE}}
  - {from: "spout_own", to: "split_own", grouping: {type: SHUFFLE}}
  - {from: "split", to: "count", grouping: {type: FIELDS, args: ["word"]}}
  - {from: "split_own", to: "count", grouping: {type: FIELDS, args: ["word"]}}
"""

# tests/multilang/sentences.py's sentences, in JavaScript: sid, then sentence(sid), replayed on fail
SENTENCES_JS = r"""
var storm = require('./storm');
var WORDS = ["the", "cow", "jumped", "over", "moon", "an", "apple", "a", "day", "keeps", "doctor", "away"];

function sentence(i) {
    var out = [];
    for (var j = 0; j < 1 + i % 6; j++) {
        out.push(WORDS[(i * 7 + j * 3) % WORDS.length]);
    }
    return out.join(' ');
}

function Sentences() {
    storm.Spout.call(this);
    this.next = 0;
    this.replay = [];
}
Sentences.prototype = Object.create(storm.Spout.prototype);
Sentences.prototype.constructor = Sentences;
Sentences.prototype.initialize = function(conf, context, done) {
    this.limit = conf['test.sentences'];
    done();
};
Sentences.prototype.nextTuple = function(done) {
    var sid = this.replay.length ? this.replay.pop() : (this.next < this.limit ? this.next++ : null);
    if (sid === null) {
        done();
        return;
    }
    this.emit({tuple: [sid, sentence(sid)], id: sid}, function(taskIds) { done(); });
};
Sentences.prototype.fail = function(id, done) {
    this.replay.push(id);
    done();
};
Sentences.prototype.activate = function(done) { done(); };
Sentences.prototype.deactivate = function(done) { done(); };
Sentences.prototype.ack = function(id, done) { done(); };

new Sentences().run();
"""

SPLIT_PY = """\
import storm


class SplitSentenceBolt(storm.BasicBolt):
    def process(self, tup):
        sid, sentence = tup.values
        for pos, word in enumerate(sentence.split(" ")):
            storm.emit([word, sid, pos])


SplitSentenceBolt().run()
"""


def _maven_project(root: Path, markers: Path) -> Path:
    """The project; returns its Flux file."""
    jar = root / "src" / "main" / "resources"
    own = jar / "resources" / "own"
    own.mkdir(parents=True)
    (root / "pom.xml").write_text("<project><artifactId>maven-multilang</artifactId></project>\n")
    (jar / "topology.yaml").write_text(FLUX)
    for folder in (jar / "resources", own):
        (folder / "sentences.js").write_text(SENTENCES_JS)
        (folder / "split.py").write_text(SPLIT_PY)
    # the project's own adapters: Storm's, each with a line that leaves a marker when loaded
    (own / "storm.py").write_text((MULTILANG / "storm.py").read_text() + (
        f"\nimport os as _os\nopen(_os.path.join({str(markers)!r}, 'storm.py-%d' % _os.getpid()), 'w').close()\n"))
    (own / "storm.js").write_text((MULTILANG / "storm.js").read_text() + (
        f"\nrequire('fs').writeFileSync({str(markers)!r} + '/storm.js-' + process.pid, '');\n"))
    return jar / "topology.yaml"


def _package(home: Path, name: str) -> dict[str, bytes]:
    import io
    import zipfile

    from heron_py.state import LocalFsStateManager

    with zipfile.ZipFile(io.BytesIO(LocalFsStateManager(home).get_package(name))) as z:
        return {n: z.read(n) for n in z.namelist()}


def _logs(home: Path, name: str) -> str:
    return "".join(f.read_text(errors="replace") for f in sorted(TopologyPaths.of(name, home).logs.rglob("*.log")))


def test_a_maven_projects_shell_components_run_on_heron_pys_adapters_and_its_own(heron_home, tmp_path):
    markers = tmp_path / "markers"
    markers.mkdir()
    flux = _maven_project(tmp_path / "project", markers)
    resources = flux.parent / "resources"
    want = expected_words(60)

    def complete(received: dict) -> bool:
        got = by_source((r["source"], r["values"]) for r in received.get("count", []))
        return all(set(got.get(s, ())) >= want for s in ("split", "split_own"))

    run = run_local(flux, home=heron_home, capture=["count"], until=complete, timeout=150, keep_running=True)
    try:
        got = by_source((r["source"], r["values"]) for r in run.received["count"])
        for source in ("split", "split_own"):
            assert set(got[source]) == want, source  # every word of every sentence
        # the project's own adapters ran in own/ (a marker per process that loaded them) ...
        loaded = sorted(p.name.split("-")[0] for p in markers.iterdir())
        assert set(loaded) == {"storm.py", "storm.js"}, loaded
        # ... shipped byte for byte; the package holds no other adapter (heron-py's come with it)
        pkg = _package(heron_home, "maven-multilang")
        assert {n for n in pkg if n.startswith("resources/")} == {
            "resources/sentences.js", "resources/split.py", "resources/own/sentences.js", "resources/own/split.py",
            "resources/own/storm.py", "resources/own/storm.js"}
        for adapter in ("storm.py", "storm.js"):
            assert pkg[f"resources/own/{adapter}"] == (resources / "own" / adapter).read_bytes()
        # in each container: heron-py's storm.js written beside sentences.js, the project's kept
        unpacked = sorted(TopologyPaths.of("maven-multilang", heron_home).root.rglob("package/resources"))
        assert unpacked, "no unpacked package found"
        spout_dirs = [d for d in unpacked if (d / "storm.js").exists()]
        assert spout_dirs, "no container wrote heron-py's storm.js beside sentences.js"
        for d in spout_dirs:
            assert (d / "storm.js").read_bytes() == NODE_ADAPTER.read_bytes()
        for d in unpacked:
            assert not (d / "storm.py").exists()  # Python's is found on the PYTHONPATH, never written
            assert (d / "own" / "storm.js").read_bytes() == (resources / "own" / "storm.js").read_bytes()
        logs = _logs(heron_home, "maven-multilang")
        assert "No module named 'storm'" not in logs and "Cannot find module" not in logs
        assert "Traceback" not in logs
    finally:
        kill_local(heron_home, "maven-multilang")
    # the source tree was not written to
    assert sorted(p.name for p in resources.iterdir()) == ["own", "sentences.js", "split.py"]


def test_storms_flux_multilang_example_runs_with_storm_js_beside_it(heron_home, tmp_path):
    """Storm's multilang.yaml, randomsentence.js and splitsentence.py, unchanged, with Storm's
    storm.js beside them and no storm.py: Storm's JavaScript adapter for the spout, heron-py's
    Python adapter for the split bolt."""
    project = tmp_path / "storm_flux"
    shutil.copytree(STORM_FLUX, project)
    shutil.copy(MULTILANG / "storm.js", project / "storm.js")
    vocabulary = {w for s in STORM_SENTENCES for w in s.split()}
    acked = re.compile(r"ShellLog pid:\d+ Received ack for - \d+")

    def enough(got: dict) -> bool:
        return len(got["count"]) >= 30 and acked.search(_logs(heron_home, "shell-topology")) is not None

    # at least once, as Storm runs it (one acker per worker): the spout gets its acks
    run = run_local(project / "multilang.yaml", home=heron_home, capture=["count"], timeout=120, keep_running=True,
                    properties={"topology.reliability.mode": "ATLEAST_ONCE"}, until=enough)
    try:
        words = [r["values"][0] for r in run.received["count"]]
        assert set(words) <= vocabulary and len(words) >= 30
        pkg = _package(heron_home, "shell-topology")
        # the script's require('./storm') ships Storm's storm.js with it, byte for byte
        assert {"randomsentence.js", "splitsentence.py", "storm.js"} <= set(pkg) and "storm.py" not in pkg
        assert pkg["storm.js"] == (MULTILANG / "storm.js").read_bytes()
        logs = _logs(heron_home, "shell-topology")
        assert "Traceback" not in logs and "Cannot find module" not in logs
    finally:
        kill_local(heron_home, "shell-topology")


def test_examples_storm_runs_without_an_adapter_of_its_own(heron_home):
    example = ROOT / "examples" / "storm"
    assert not (example / "resources" / "storm.py").exists() and not (example / "resources" / "storm.py").is_symlink()
    logged = re.compile(r"source: count:\d+, stream: default, id: \{\}, \[(\w+), (\d+)\]")
    vocabulary = {w for s in STORM_SENTENCES for w in s.split()}
    run = run_local(example / "flux_word_count.yaml", home=heron_home, capture=["count"], timeout=120,
                    until=lambda got: len(got["count"]) >= 20 and len(
                        logged.findall(_logs(heron_home, "flux-word-count"))) >= 5)
    assert {r["values"][0] for r in run.received["count"]} <= vocabulary
    assert {w for w, _ in logged.findall(_logs(heron_home, "flux-word-count"))} <= vocabulary
    assert sorted(p.name for p in (example / "resources").iterdir()) == ["sentences.py", "splitsentence.py"]


def test_dry_run_passes_a_project_without_adapters_and_refuses_a_missing_node_script(heron_home, tmp_path):
    project = tmp_path / "storm_flux"
    shutil.copytree(STORM_FLUX, project)  # no storm.py, no storm.js
    p = run_cli(heron_home, "submit", "local", "--dry-run", str(project / "multilang.yaml"))
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("topology 'shell-topology' (dry run: nothing stored, nothing launched)")
    (project / "randomsentence.js").unlink()
    p = run_cli(heron_home, "submit", "local", "--dry-run", str(project / "multilang.yaml"))
    assert (p.returncode, p.stdout) == (1, "")
    assert p.stderr == (f"heron-py: error: component 'sentence-spout': its command ['node', 'randomsentence.js'] "
                        f"runs randomsentence.js, which is neither in {project / 'resources' / 'randomsentence.js'} "
                        f"nor beside the topology file at {project / 'randomsentence.js'}; expected the script in "
                        f"one of them\n")
