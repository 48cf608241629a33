"""A live rescale's switch stores the definition and packing the master switched to: whatever
another ``update`` wrote into the state manager meanwhile (a refused one putting back what it
had read, from an older client), what the executors and the API read ends as what runs."""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path

from heron_py.api.stream import Grouping
from heron_py.api.topology import TopologyBuilder
from heron_py.planner.packing import repack, round_robin
from heron_py.state.localfs import LocalFsStateManager
from tests.fakes import Counter, WordSpout
from topology_master.main import TopologyMaster

SECRET = b"k" * 32


def test_the_switch_stores_what_runs_over_what_another_update_wrote(tmp_path: Path) -> None:
    b = TopologyBuilder("wc")
    spout = b.add_spout("words", WordSpout, par=1)
    b.add_bolt("count", Counter, par=2, inputs={spout: Grouping.fields("word")})
    old = b.build()
    state = LocalFsStateManager(tmp_path / "state")
    state.set_secret("wc", SECRET)
    old_packing = round_robin(old, 2)
    new = replace(old, components=tuple(replace(c, par=3) if c.name == "count" else c for c in old.components))
    new_packing = repack(old_packing, new)
    state.set_topology(old, SECRET)  # another update put the old documents back mid-rescale
    state.set_packing_plan("wc", old_packing)
    tm = TopologyMaster(topology="wc", secret=SECRET, state=state, log=logging.getLogger("tmanager"),
                        home=tmp_path / "home")
    tm.definition_switched(new, new_packing)
    tm._worker.close(wait=True)  # the state thread's writes done
    assert state.get_packing_plan("wc") == new_packing
    stored = state.get_topology("wc")
    assert stored is not None and stored.component("count").par == 3
