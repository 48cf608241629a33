"""Storm and Heron projects run as their users lay them out (the fake projects of
tests/projects/), each submitted to the local scheduler as its users would and checked by its
output: a streamparse project whose components read data files from src/ (natively, and with
--config-property heron_py.pystorm.mode=subprocess), a Flux YAML with a multilang script and
its data file beside it, a Maven project's Flux YAML with its scripts in multilang/resources/,
and a heronpy topology laid out as a package with __main__.py and relative imports."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from heron_py.flux.builtins import WORDS
from heron_py.testing import run_local

pytestmark = pytest.mark.integration

PROJECTS = Path(__file__).resolve().parents[1] / "projects"
STREAMPARSE = PROJECTS / "streamparse_data"
# src/resources/words.txt's words without bolts/stopwords.txt's
KEPT = Counter(["quick", "brown", "fox", "jumps", "over", "lazy", "dog", "tale", "two", "cities"])


def _words_run(home: Path, name: str, properties: dict[str, str] | None = None) -> list[list[object]]:
    run = run_local(STREAMPARSE / "topologies" / "datawords.py", home=home, name=name, capture=["sink"],
                    until=lambda got: len(got["sink"]) >= sum(KEPT.values()), timeout=30, properties=properties)
    return [r["values"] for r in run.received["sink"]]


def test_a_streamparse_project_reads_its_data_files_from_src(heron_home):
    got = _words_run(heron_home, "datawords")
    assert Counter(word for word, _ in got) == KEPT
    assert {runs_as for _, runs_as in got} == {"in-process"}


def test_a_streamparse_project_in_subprocess_mode_from_the_command_line(heron_home):
    got = _words_run(heron_home, "datawords-sub", {"heron_py.pystorm.mode": "subprocess"})
    assert Counter(word for word, _ in got) == KEPT
    assert {runs_as for _, runs_as in got} == {"subprocess"}  # python -m streamparse.run, as on Storm


def _counted_words(home: Path, topology: Path, name: str) -> set[str]:
    run = run_local(topology, home=home, name=name, capture=["count"], until=lambda got: len(got["count"]) >= 30,
                    timeout=30)
    return {r["values"][0] for r in run.received["count"]}


def test_a_flux_script_reads_the_data_file_beside_it(heron_home):
    # flux_data/stopwords.txt names mike and golda
    assert _counted_words(heron_home, PROJECTS / "flux_data" / "topology.yaml", "flux-data") == \
        set(WORDS) - {"mike", "golda"}


def test_a_maven_projects_yaml_runs_its_multilang_resources(heron_home):
    # maven_flux/multilang/resources/stopwords.txt names nathan and bertels
    yaml = PROJECTS / "maven_flux" / "src" / "main" / "resources" / "topology.yaml"
    assert _counted_words(heron_home, yaml, "maven-flux") == set(WORDS) - {"nathan", "bertels"}


def test_a_package_with_main_and_relative_imports_runs(heron_home):
    run = run_local(PROJECTS / "heronpy_package" / "mytopo", ["letters"], home=heron_home, name="letters",
                    capture=["sink"], until=lambda got: len(got["sink"]) >= 3, timeout=30)
    assert sorted(r["values"][0] for r in run.received["sink"]) == ["A!", "B!", "C!"]
