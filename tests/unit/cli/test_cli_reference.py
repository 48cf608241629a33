"""The CLI's reference page (docs/reference/cli.md, scripts/gen_reference.py): usages shown as
typed, the state-manager options in one table that every verb taking them links to; and
counts of containers and tasks in the CLI's sentences."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from heron_py.api.bolt.bolt import Bolt
from heron_py.api.spout.spout import Spout
from heron_py.api.topology import TopologyBuilder
from heron_py.cli.submit import dry_run_text, prepare
from heron_py.cli.words import counted
from heron_py.planner.packing import round_robin

ROOT = Path(__file__).resolve().parents[3]
KILL = """## kill

stop every process of a topology and remove its state

```
heron-py kill [options] [CLUSTER] NAME
```

| argument | what it does | choices | default |
|---|---|---|---|
| `--verbose` | log heron-py's own steps (DEBUG) and show the traceback of an error |  |  |
| `CLUSTER` | where the topology runs: local, slurm or kubernetes (Heron's CLUSTER/ROLE/ENV is accepted); \
local when left out: a first word that names no cluster is the topology's name (heron-py kill wc is heron-py kill \
local wc) | `local`, `slurm`, `kubernetes` |  |
| `NAME` | the topology's name (heron-py list CLUSTER shows them) |  |  |

It also takes the [state-manager options](#state-manager-options).

```
examples:
  heron-py kill wc   (the local cluster's)
  heron-py kill slurm wc
```

"""


class S(Spout):
    outputs = ["x"]


class B(Bolt):
    outputs: list[str] = []


def _page() -> str:
    spec = importlib.util.spec_from_file_location("gen_reference", ROOT / "scripts" / "gen_reference.py")
    assert spec is not None and spec.loader is not None
    mod: ModuleType = importlib.util.module_from_spec(spec)
    sys.modules["gen_reference"] = mod
    spec.loader.exec_module(mod)
    page: str = mod.render_cli()
    return page


def test_usages_are_shown_as_typed_and_the_state_options_have_one_table() -> None:
    page = _page()
    assert "\\[options\\]" not in page and "\\[CLUSTER\\]" not in page
    assert KILL in page
    assert "```\nheron-py submit [options] [CLUSTER] FILE [TOPOLOGY ARG ...] [-- TOPOLOGY ARG ...]\n```\n" in page
    # the ZooKeeper rows once, in their own section at the end, linked from every verb that reads state
    assert page.count("| `--zk HOST:PORT[,HOST:PORT...][/chroot]` |") == 1
    assert page.count("| `--state-manager STATE_MANAGER` |") == 1
    section = page.split("\n## State-manager options\n", 1)[1]
    assert "\n## " not in section and "| `--zk-tls`, `--no-zk-tls` |" in section
    links = page.count("It also takes the [state-manager options](#state-manager-options).")
    verbs = page.count("\n## ") - 1
    assert (links, verbs) == (16, 20)  # every verb but version, help, init and run
    for verb in ("version", "help", "init", "run"):
        assert "state-manager options" not in page.split(f"\n## {verb}\n", 1)[1].split("\n## ", 1)[0]


def test_counts_of_containers_and_tasks_agree_with_their_number() -> None:
    assert [counted(0, "container"), counted(1, "container"), counted(2, "task")] == [
        "0 containers", "1 container", "2 tasks"]
    b = TopologyBuilder("one")
    b.add_bolt("b", B, par=1, inputs=[b.add_spout("s", S, par=1)])
    topo, n = prepare(b.build(), name=None, containers=None, properties={})
    assert dry_run_text(topo, round_robin(topo, n)).splitlines()[-2:] == [
        "packing: 2 tasks in 1 container", "  container 0: s-1, b-2"]
