"""--config-property counts at submit where the file's config would: ``heron_py.pystorm.mode``
when a streamparse topology is translated, ``heron_py.shell.cwd`` when the package's shell
scripts are checked (the fake projects of tests/projects/)."""

from __future__ import annotations

import json
import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from streamparse import Bolt, Spout, Topology

from heron_py.api.shell import ShellBolt, ShellSpout
from heron_py.cli.submit import SubmitError, load_topology_file, package_for, prepare
from heron_py.common.config_codec import restore_config
from heron_py.common.layout import IGNORED
from heron_py.common.package import human_bytes
from heron_py.multilang.setup import COMMAND_KEY, CWD_KEY
from heron_py.planner.errors import TopologyError
from heron_py.storm import CLASS_KEY, MODE_KEY
from heron_py.storm.native import PystormBolt, PystormSpout
from heron_py.storm.streamparse_dsl import translate

PROJECTS = Path(__file__).resolve().parents[2] / "projects"


@pytest.fixture(autouse=True)
def own_imports():
    """The project's modules (bolts, spouts: the names every streamparse project uses) imported
    fresh and forgotten afterwards, so other projects' tests in this process get their own."""
    path, modules = list(sys.path), dict(sys.modules)
    for name in [n for n in sys.modules if n.split(".")[0] in ("bolts", "spouts")]:
        del sys.modules[name]
    yield
    sys.path[:] = path
    for name in [n for n in sys.modules if n not in modules]:
        del sys.modules[name]
    sys.modules.update(modules)


def _runs(topo, name):
    comp = topo.component(name)
    return pickle.loads(comp.class_ref.data), restore_config(comp.config)


def test_pystorm_mode_from_config_property_translates_every_component(tmp_path):
    topology = PROJECTS / "streamparse_data" / "topologies" / "datawords.py"
    topo = load_topology_file(topology, [], properties={MODE_KEY: "subprocess"})
    cls, conf = _runs(topo, "word_spout")
    assert cls is ShellSpout and CLASS_KEY not in conf
    assert conf[COMMAND_KEY] == [sys.executable, "-m", "streamparse.run", "spouts.words.FileWordSpout", "-s", "json"]
    cls, conf = _runs(topo, "filter_bolt")
    assert cls is ShellBolt and conf[COMMAND_KEY][3] == "bolts.stopwords.StopwordBolt"
    # the plan still names the user's classes
    assert topo.component("filter_bolt").class_name == "bolts.stopwords:StopwordBolt"
    # without the property: native, in the instance
    topo = load_topology_file(topology, [])
    assert _runs(topo, "word_spout")[0] is PystormSpout and _runs(topo, "filter_bolt")[0] is PystormBolt


class Src(Spout):
    outputs = ["word"]


class Sink(Bolt):
    pass


def test_a_components_own_mode_wins_over_the_config_property():
    class T(Topology):
        config = {MODE_KEY: "subprocess"}
        src = Src.spec()
        sink = Sink.spec(inputs=[src], config={MODE_KEY: "subprocess"})

    topo = translate(T, overrides={MODE_KEY: "native"})  # the class's subprocess overridden
    assert _runs(topo, "src")[0] is PystormSpout
    assert _runs(topo, "sink")[0] is ShellBolt  # the component's own config decides for it
    with pytest.raises(TopologyError) as e:
        translate(T, overrides={MODE_KEY: "thread"})
    assert str(e.value) == ("streamparse topology 'T': --config-property heron_py.pystorm.mode is 'thread'; "
                            "expected 'native' or 'subprocess'")


def _flux_without_its_script(tmp_path: Path) -> Path:
    project = tmp_path / "flux_data"
    shutil.copytree(PROJECTS / "flux_data", project)
    (project / "filter.py").unlink()  # installed elsewhere, where heron_py.shell.cwd points
    return project / "topology.yaml"


def test_shell_cwd_from_config_property_counts_at_submit(tmp_path):
    yaml = _flux_without_its_script(tmp_path)
    topo = load_topology_file(yaml, [])
    checked, _ = prepare(topo, name=None, containers=None, properties={})
    with pytest.raises(SubmitError) as e:
        package_for(checked, yaml, [])
    assert str(e.value) == (f"component 'filter': its command ['python3', 'filter.py'] runs filter.py, which is "
                            f"neither in {yaml.parent / 'resources' / 'filter.py'} nor beside the topology file at "
                            f"{yaml.parent / 'filter.py'}; expected the script in one of them")
    checked, _ = prepare(topo, name=None, containers=None, properties={CWD_KEY: str(tmp_path / "installed")})
    pkg = package_for(checked, yaml, [])
    assert "filter.py" not in pkg.sizes and "stopwords.txt" in pkg.sizes


def test_a_package_over_warn_bytes_is_one_warning_line(tmp_path):
    yaml = PROJECTS / "flux_data" / "topology.yaml"

    def dry_run(*extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "heron_py.cli.main", "submit", "local", "--dry-run", *extra,
                               str(yaml)], capture_output=True, text=True, timeout=60, cwd=tmp_path,
                              env=dict(os.environ, HERON_PY_HOME=str(tmp_path / "home")))

    p = dry_run()
    assert (p.returncode, p.stderr) == (0, "")
    p = dry_run("--config-property", "heron_py.package.warn.bytes=100")
    assert p.returncode == 0, p.stderr
    files = {name: (PROJECTS / "flux_data" / name).stat().st_size for name in ("topology.yaml", "filter.py",
                                                                               "stopwords.txt")}
    manifest = len(json.dumps({"main": "topology.yaml", "argv": [], "workdir": "", "package": None,
                               "modules": ["filter.py"]}))
    total = sum(files.values()) + manifest
    assert p.stderr == (
        f"heron-py: warning: the topology package is {human_bytes(total)} in 4 files, over "
        f"heron_py.package.warn.bytes (100 bytes); largest: topology.yaml ({human_bytes(files['topology.yaml'])}), "
        f"filter.py ({files['filter.py']} bytes), __heron_package__.json ({manifest} bytes); every container "
        f"unpacks it: keep data out of the shipped folders (never shipped: {'; '.join(IGNORED)})\n")
