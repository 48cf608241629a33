"""Submit refuses health manager settings (``heron_py.autoscale.*``) the running master would
refuse: a kind or bound of the config table (validate's check), and the health manager's own
checks (a factor above 1, a share up to 1, ``comp:N,...``, min not above max, the topology's
components), each as one line naming the topology and the key."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from heron_py.api.bolt.bolt import Bolt
from heron_py.api.spout.spout import Spout
from heron_py.api.topology import TopologyBuilder
from heron_py.cli.config_check import key_warnings
from heron_py.cli.submit import prepare
from heron_py.common.config import KEYS
from heron_py.planner.errors import TopologyError
from heron_py.planner.model import TopologyDef

P = "heron_py.autoscale."


class S(Spout):
    outputs = ["word"]


class B(Bolt):
    outputs: list[str] = []


def _topology(config: dict[str, Any] | None = None) -> TopologyDef:
    b = TopologyBuilder("wc")
    b.add_bolt("count", B, par=2, inputs=[b.add_spout("words", S, par=1)])
    if config:
        b.set_config(config)
    topo: TopologyDef = b.build()
    return topo


def _refusal(properties: dict[str, str], config: dict[str, Any] | None = None) -> str:
    with pytest.raises(TopologyError) as e:
        prepare(_topology(config), name=None, containers=None, properties=properties)
    return str(e.value)


@pytest.mark.parametrize(("key", "raw", "expected"), [
    # the table's kind and bound (check_topology_config)
    ("enabled", "yes", "true or false"),
    ("interval.secs", "0", "a number of seconds > 0"),
    ("cooldown.secs", "-1", "a number of seconds >= 0"),
    ("idle.threshold", "-0.1", "a number from 0 to 1"),
    ("max.scale.factor", "1", "a number > 1"),
    ("backpressure.threshold", "1.5", "a number from 0 to 1"),
    # the health manager's own checks
    ("min.parallelism", "count:0", "an integer >= 1, or 'comp:N,...' with each component once and each N an "
                                   "integer >= 1"),
    ("target.rate", "words", "'spout:rate,...' with each source component once and each rate a number of "
                             "records/s > 0"),
])
def test_a_bad_value_is_refused_at_submit_in_one_line(key: str, raw: str, expected: str) -> None:
    assert _refusal({P + key: raw}) == f"topology 'wc': config {P}{key}: expected {expected}, found {raw!r}"


def test_a_value_in_the_topologys_own_config_is_refused_as_one_given_at_submit() -> None:
    assert _refusal({}, {P + "idle.threshold": 2}) == (
        f"topology 'wc': config {P}idle.threshold: expected a number from 0 to 1, found '2'")


def test_settings_naming_what_the_topology_lacks_are_refused_at_submit() -> None:
    assert _refusal({P + "target.rate": "count:100"}) == (
        f"topology 'wc': config {P}target.rate: expected source components (words), found 'count'")
    assert _refusal({P + "max.parallelism": "counter:4"}) == (
        f"topology 'wc': config {P}max.parallelism: expected components of the topology (count, words), "
        f"found 'counter'")
    assert _refusal({P + "min.parallelism": "count:5", P + "max.parallelism": "4"}) == (
        f"topology 'wc': config {P}min.parallelism: expected at most {P}max.parallelism (4 for count), "
        f"found 'count:5'")


def test_good_settings_pass_and_are_kept_for_the_master() -> None:
    props = {P + "enabled": "true", P + "target.rate": "words:2000", P + "min.parallelism": "count:2",
             P + "max.parallelism": "8", P + "max.scale.factor": "1.5", P + "idle.threshold": "1"}
    topo, n = prepare(_topology(), name=None, containers=None, properties=props)
    assert n == 1
    assert {k: v for k, v in topo.config.items() if k.startswith(P)} == props


def test_the_keys_are_known_to_submits_warnings_and_a_misspelt_one_is_named() -> None:
    ours = sorted(k for k in KEYS if k.startswith(P))
    assert len(ours) == 11 and key_warnings(ours) == []
    assert key_warnings([P + "enable"]) == [f"unknown config key '{P}enable'; did you mean '{P}enabled'?"]


def test_the_command_line_prints_the_refusal_as_its_last_line(tmp_path: Path) -> None:
    f = tmp_path / "t.py"
    f.write_text(textwrap.dedent('''
        from heronpy.api.bolt.bolt import Bolt
        from heronpy.api.spout.spout import Spout
        from heronpy.api.topology import TopologyBuilder

        class S(Spout):
            outputs = ["word"]

        class B(Bolt):
            outputs = []

        b = TopologyBuilder("wc")
        b.add_bolt("count", B, par=1, inputs=[b.add_spout("words", S, par=1)])
        b.build_and_submit()
    '''))
    p = subprocess.run([sys.executable, "-m", "heron_py.cli.main", "submit", "local", str(f), "--dry-run",
                        "--config-property", f"{P}max.scale.factor=0.5"],
                       capture_output=True, text=True, timeout=120,
                       env={**os.environ, "HERON_PY_HOME": str(tmp_path / "home")})
    assert p.returncode != 0
    assert p.stderr.splitlines()[-1] == (f"heron-py: error: topology 'wc': config {P}max.scale.factor: expected "
                                         f"a number > 1, found '0.5'")
