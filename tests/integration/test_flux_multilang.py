"""Storm's own multilang adapters (storm.py and storm.js from tests/multilang, unchanged) as
shell components of a Flux YAML file, laid out as a Storm project (scripts in resources/ beside
the YAML, shipped in the topology package): exact words per split bolt, at least once, on 2
containers."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from heron_py.testing import run_local
from tests.integration.test_shell_components import by_source, expected_words

pytestmark = pytest.mark.integration

MULTILANG = Path(__file__).resolve().parent.parent / "multilang"
SCRIPTS = ["storm.py", "storm.js", "sentences.py", "sentencespout.py", "splitsentence.py", "splitsentence.js"]

FLUX = """\
name: "flux-multilang"
config:
  topology.workers: 2
  topology.acker.executors: 1
  test.sentences: ${sentences}
spouts:
  - id: "sentences"
    className: "org.apache.storm.flux.wrappers.spouts.FluxShellSpout"
    constructorArgs:
      - ["python3", "sentencespout.py"]
      - ["sid", "sentence"]
bolts:
  - id: "split_py"
    className: "org.apache.storm.flux.wrappers.bolts.FluxShellBolt"
    constructorArgs: [["python3", "splitsentence.py"], ["word", "sid", "pos"]]
    parallelism: 2
  - id: "split_js"
    className: "org.apache.storm.flux.wrappers.bolts.FluxShellBolt"
    constructorArgs: [["node", "splitsentence.js"], ["word", "sid", "pos"]]
  - id: "count"
    className: "org.apache.storm.testing.TestWordCounter"
    parallelism: 2
streams:
  - {from: "sentences", to: "split_py", grouping: {type: SHUFFLE}}
  - {from: "sentences", to: "split_js", grouping: {type: SHUFFLE}}
  - {from: "split_py", to: "count", grouping: {type: FIELDS, args: ["word"]}}
  - {from: "split_js", to: "count", grouping: {type: FIELDS, args: ["word"]}}
"""


def test_storm_py_and_storm_js_shell_components_through_flux(heron_home: Path, tmp_path: Path) -> None:
    if shutil.which("node") is None:
        pytest.skip("Node.js (/usr/bin/node, Debian's nodejs) is not installed")
    project = tmp_path / "project"
    (project / "resources").mkdir(parents=True)
    for f in SCRIPTS:
        shutil.copy(MULTILANG / f, project / "resources" / f)
    (project / "topology.yaml").write_text(FLUX)
    (project / "dev.properties").write_text("sentences=120\n")
    n = 120
    want = expected_words(n)

    def complete(received: dict) -> bool:
        got = by_source((r["source"], r["values"]) for r in received.get("count", []))
        return all(set(got.get(s, ())) >= want for s in ("split_py", "split_js"))

    run = run_local(project / "topology.yaml", home=heron_home, capture=["count"], until=complete, timeout=120,
                    submit_args=["--filter", str(project / "dev.properties")])
    got = by_source((r["source"], r["values"]) for r in run.received["count"])
    for s in ("split_py", "split_js"):
        assert set(got[s]) == want, s  # every word of every sentence, through each adapter
    logs = "".join(p.read_text(errors="replace") for p in heron_home.rglob("*.log"))
    assert "Traceback" not in logs
