"""heronpy 0.15's names: its package's top-level re-exports (``from heronpy import Grouping,
TopologyBuilder``) and Heron 0.15's source paths (``heron.api.src.python...``, which its wheel
shipped as a top-level ``heron`` package). Topology files written with them load as
``heron-py submit`` loads them and run in process; the names are heron_py.api's objects; and
the ``heron`` package is installed with the project."""

from __future__ import annotations

import importlib
import sys
import tomllib
from collections import Counter
from pathlib import Path

import pytest
from setuptools import find_namespace_packages

from heron_py.cli.submit import load_topology_file
from heron_py.common.serialization import MAIN_ALIAS
from heron_py.testing import run_in_process

ROOT = Path(__file__).resolve().parents[3]

# the components, the same in every file: the imports above them differ
COMPONENTS = '''
WORDS = ["heron", "storm", "heron", "flink", "heron", "storm"]


class WordSpout(Spout):
    outputs = ["word"]

    def initialize(self, config, context):
        self.words = iter(WORDS)

    def next_tuple(self):
        word = next(self.words, None)
        if word is not None:
            self.emit([word])


class CountBolt(Bolt):
    outputs = ["word", "count"]

    def initialize(self, config, context):
        self.counts = {}

    def process(self, tup):
        word = tup.values[0]
        self.counts[word] = self.counts.get(word, 0) + 1
        self.emit([word, self.counts[word]])


class Sink(Bolt):
    outputs = []

    def process(self, tup):
        pass
'''

BUILDER = '''

if __name__ == "__main__":
    builder = TopologyBuilder(name=sys.argv[1])
    spout = builder.add_spout("word_spout", WordSpout, par=1)
    count = builder.add_bolt("count_bolt", CountBolt, par=2, inputs={spout: Grouping.fields("word")},
                             config={constants.TOPOLOGY_TICK_TUPLE_FREQ_SECS: 10})
    builder.add_bolt("sink", Sink, par=1, inputs={count: Grouping.SHUFFLE})
    builder.set_config({constants.TOPOLOGY_RELIABILITY_MODE: constants.TopologyReliabilityMode.ATLEAST_ONCE})
    builder.build_and_submit()
'''

FILES = {
    # heronpy 0.15.0's package: the API at its top
    "heronpy_015.py": ("import sys\n\n"
                       "from heronpy import Bolt, Grouping, Spout, TopologyBuilder, api_constants as constants\n"),
    # Heron 0.15's source paths, as its own examples imported them
    "heron_src_paths.py": (
        "import sys\n\n"
        "import heron.api.src.python.api_constants as constants\n"
        "from heron.api.src.python.bolt.bolt import Bolt\n"
        "from heron.api.src.python.spout.spout import Spout\n"
        "from heron.api.src.python.stream import Grouping\n"
        "from heron.api.src.python.topology import TopologyBuilder\n"),
    # the source tree's package re-exports before 0.15.0
    "heron_src_package.py": (
        "import sys\n\n"
        "from heron.api.src.python import Bolt, Grouping, Spout, TopologyBuilder\n"
        "from heron.api.src.python import api_constants as constants\n"),
}

# a class-style topology (heronpy's Topology with Spout.spec()/Bolt.spec()) on the source paths
CLASS_STYLE = ("import sys\n\n"
               "from heron.api.src.python.bolt.bolt import Bolt\n"
               "from heron.api.src.python.spout.spout import Spout\n"
               "from heron.api.src.python.stream import Grouping\n"
               "from heron.api.src.python.topology import Topology\n"
               + COMPONENTS + '''

class WordCount(Topology):
    word_spout = WordSpout.spec(par=1)
    count_bolt = CountBolt.spec(par=2, inputs={word_spout: Grouping.fields("word")})
    sink = Sink.spec(par=1, inputs={count_bolt: Grouping.SHUFFLE})
''')


@pytest.fixture
def load(tmp_path, monkeypatch):
    """Loads a topology file as submit does, leaving sys.path and sys.modules as they were."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setitem(sys.modules, "__heron_submitted_main__", None)
    monkeypatch.setitem(sys.modules, MAIN_ALIAS, None)

    def run(name: str, text: str):
        path = tmp_path / name
        path.write_text(text)
        topo = load_topology_file(path, ["wc"])
        # the file's classes where a container finds them: the file loaded as its main module
        sys.modules[MAIN_ALIAS] = sys.modules["__heron_submitted_main__"]
        return topo

    return run


def _counts(topo) -> Counter[tuple[str, int]]:
    result = run_in_process(topo, capture=["sink"])
    return Counter(tuple(v) for v in result.values("sink"))


EXPECTED = Counter([("heron", 1), ("heron", 2), ("heron", 3), ("storm", 1), ("storm", 2), ("flink", 1)])


@pytest.mark.parametrize("name", sorted(FILES))
def test_a_topology_file_written_with_heronpy_015s_names_loads_and_runs(load, name):
    topo = load(name, FILES[name] + COMPONENTS + BUILDER)
    assert topo.name == "wc"
    assert topo.config["topology.reliability.mode"] == "ATLEAST_ONCE"
    assert [i.grouping.kind.name for i in topo.component("count_bolt").inputs] == ["FIELDS"]
    assert _counts(topo) == EXPECTED


def test_a_class_style_topology_on_heron_015s_source_paths_loads_and_runs(load):
    topo = load("class_style.py", CLASS_STYLE)
    assert topo.name == "wc"  # Heron's CLI: the first argument names a class-style topology
    assert _counts(topo) == EXPECTED


# heronpy 0.15.0's heronpy/__init__.py, and what its packaging template added after it
HERONPY_015 = {
    "State": "state.state", "HashMapState": "state.state", "StatefulComponent": "state.stateful_component",
    "Stream": "stream", "Grouping": "stream", "Topology": "topology", "TopologyBuilder": "topology",
    "TopologyContext": "topology_context", "Bolt": "bolt.bolt", "SlidingWindowBolt": "bolt.window_bolt",
    "TumblingWindowBolt": "bolt.window_bolt", "WindowContext": "bolt.window_bolt", "Spout": "spout.spout",
    "ICustomGrouping": "custom_grouping", "CountMetric": "metrics", "MultiCountMetric": "metrics",
    "MeanReducedMetric": "metrics", "IHeronSerializer": "serializer", "PythonSerializer": "serializer",
    "default_serializer": "serializer", "ITaskHook": "task_hook", "Tuple": "tuple", "TupleHelper": "tuple",
}
# Heron 0.15's modules under heron/api/src/python (its wheel's), each the heronpy.api module's names
SOURCE_MODULES = ["api_constants", "bolt.base_bolt", "bolt.bolt", "bolt.window_bolt", "component.base_component",
                  "component.component_spec", "custom_grouping", "metrics", "serializer", "spout.base_spout",
                  "spout.spout", "state.state", "state.stateful_component", "stream", "task_hook", "topology",
                  "topology_context", "tuple"]


def test_heronpy_015s_top_level_names_are_heron_pys_objects():
    import heronpy

    for name, module in HERONPY_015.items():
        assert getattr(heronpy, name) is getattr(importlib.import_module(f"heron_py.api.{module}"), name), name
    assert heronpy.api_constants is importlib.import_module("heron_py.api.api_constants")
    assert heronpy.global_metrics is importlib.import_module("heron_py.api.global_metrics")
    assert set(HERONPY_015) <= set(dir(heronpy))
    with pytest.raises(ImportError, match="cannot import name 'Nothing' from 'heronpy'"):
        exec("from heronpy import Nothing")


@pytest.mark.parametrize("module", SOURCE_MODULES)
def test_heron_015s_source_modules_hold_heronpys_names(module):
    alias = importlib.import_module(f"heron.api.src.python.{module}")
    real = importlib.import_module(f"heronpy.api.{module}")
    public = [n for n in dir(real) if not n.startswith("_") and n != "annotations"]
    assert public
    for n in public:
        assert getattr(alias, n) is getattr(real, n), f"{module}.{n}"


def test_heron_015s_module_objects_are_shared():
    import cloudpickle

    import heron_py.api.global_metrics

    assert importlib.import_module("heron.api.src.python.global_metrics") is heron_py.api.global_metrics
    assert importlib.import_module("heron.api.src.python.cloudpickle") is cloudpickle
    assert importlib.import_module("heronpy.api.cloudpickle") is cloudpickle


def test_heron_is_a_namespace_package_installed_with_the_project():
    """No heron/__init__.py (a Heron source tree on PYTHONPATH joins it; another distribution's
    ``heron`` package is never overwritten), and pyproject.toml's package list ships it."""
    import heron

    assert getattr(heron, "__file__", None) is None and not (ROOT / "heron" / "__init__.py").exists()
    find = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    found = set(find_namespace_packages(str(ROOT), include=find["include"]))
    expected = {f"heron.api.src.python{sub}" for sub in ("", ".bolt", ".component", ".spout", ".state")}
    assert expected <= found
    assert not any(p.startswith(("tests", "examples", "build")) for p in found)
