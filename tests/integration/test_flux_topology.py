"""A Storm Flux YAML file (TestWordSpout → TestWordCounter → LogInfoBolt) on the local scheduler."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from heron_py.common.container_layout import TopologyPaths
from heron_py.flux.builtins import WORDS
from heron_py.testing import run_local

pytestmark = pytest.mark.integration

FLUX = Path(__file__).resolve().parent.parent / "flux"
# what LogInfoBolt logs for each (word, count) tuple, as Storm's tuple text
LOGGED = re.compile(r"source: bolt-1:\d+, stream: default, id: \{\}, \[(\w+), (\d+)\]")


def logged_counts(home: Path, name: str) -> list[tuple[str, int]]:
    out = []
    for f in sorted(TopologyPaths.of(name, home).logs.rglob("*.log")):
        out += [(m.group(1), int(m.group(2))) for m in LOGGED.finditer(f.read_text(errors="replace"))]
    return out


def test_flux_word_count_logs_running_counts(heron_home):
    logged: list[tuple[str, int]] = []

    def enough(received: dict[str, list[dict[str, object]]]) -> bool:
        logged[:] = logged_counts(heron_home, "flux-word-count")
        return len(received["bolt-2"]) >= 20 and len(logged) >= 20

    run = run_local(FLUX / "word_count.yaml", home=heron_home, capture=["bolt-2"], until=enough, timeout=90)
    assert run.name == "flux-word-count"
    received = [tuple(v) for v in run.values("bolt-2")]
    assert all(w in WORDS and isinstance(c, int) and c >= 1 for w, c in received)
    assert {w for w, _ in logged} <= set(WORDS)
    # per word, the counts a counter task emits run 1, 2, 3, ... (fields grouping: one task per word)
    for word in {w for w, _ in logged}:
        counts = sorted(c for w, c in logged if w == word)
        assert counts[:3] == list(range(1, min(3, len(counts)) + 1))


def test_flux_dry_run_with_filter(heron_home, tmp_path):
    from tests.support import run_cli

    proc = run_cli(heron_home, "submit", "local", "--dry-run", "--filter", str(FLUX / "substitution.properties"),
                   str(FLUX / "substitution.yaml"), FLUX_TEST_VALUE="x")
    assert proc.returncode == 0, proc.stderr
    assert "topology 'substitution-topology'" in proc.stdout
    assert "spout-1 (spout heron_py.flux.builtins:TestWordSpout, par 3)" in proc.stdout
    proc = run_cli(heron_home, "submit", "local", "--dry-run", str(FLUX / "substitution.yaml"))
    assert proc.returncode == 1
    assert proc.stderr == ("heron-py: error: flux file substitution.yaml line 2: ${topology.name} needs a --filter "
                           "properties file defining 'topology.name'; none was given\n")
