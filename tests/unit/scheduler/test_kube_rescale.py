"""``heron-py update`` of an effectively-once topology on Kubernetes, down to the API calls (the
recorder of test_kube_scheduler stands in for the API server; no cluster runs here): the repacked
StatefulSets are patched with the new plan's sizes for a live rescale (the executors in the
running pods start and stop tasks; every task restores the newest checkpoint with the keyed
state split); with no topology master to take it, as here, every pod is deleted so that each
comes back on the new plan. The stored packing has the new parallelism and the key groups
pinned; a component whose state cannot be split is refused before any API call."""

from __future__ import annotations

from pathlib import Path

import pytest

from heron_py.api.stream import Grouping
from heron_py.api.topology import TopologyBuilder
from heron_py.checkpoint.storage import LocalFsStorage
from heron_py.cli.errors import SubmitError
from heron_py.cli.lifecycle import update_topology
from heron_py.planner.packing import round_robin
from heron_py.scheduler import kube_render as kr
from heron_py.scheduler.kube import KubernetesScheduler
from heron_py.state.localfs import LocalFsStateManager
from tests.fakes import Counter, WordSpout
from tests.unit.scheduler.test_kube_scheduler import BASE, NS, Recorder, kube_api


def _setup(home: Path) -> tuple[Recorder, KubernetesScheduler, LocalFsStateManager]:
    b = TopologyBuilder("wc")
    spout = b.add_spout("words", WordSpout, par=1)
    b.add_bolt("count", Counter, par=2, inputs={spout: Grouping.fields("word")})
    # the shared volume's mount path every pod has; here a folder the CLI reads too
    b.set_config({"topology.reliability.mode": "EFFECTIVELY_ONCE", "heron_py.checkpoint.root": str(home / "ckpt")})
    topo = b.build()
    state = LocalFsStateManager(home)
    state.set_secret("wc", b"k" * 32)
    state.set_topology(topo)
    state.set_packing_plan("wc", round_robin(topo, 3))
    (home / "zk.auth").write_text("heron-py:pw\n")
    rec = Recorder()
    api = kube_api(rec)
    sched = KubernetesScheduler(state, home, options=kr.KubeOptions(namespace=NS, image="heron-py:0.1"),
                                api_factory=lambda _: api)
    sched.launch("wc", 3)
    rec.calls.clear()
    return rec, sched, state


def test_a_keyed_component_is_rescaled_on_kubernetes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HERON_PY_HOME", str(tmp_path))
    rec, sched, state = _setup(tmp_path)
    with pytest.raises(SubmitError) as e:  # no pod comes back here: the wait ends, the calls are made
        update_topology(state, sched, "wc", {"count": 3}, wait_s=0.1)
    assert str(e.value).startswith("topology 'wc' did not come back within 0.1 s")
    patches = [(p.rsplit("/", 1)[-1], b["spec"]["replicas"]) for m, p, _, b, _ in rec.calls if m == "PATCH"]
    # the live rescale's (the StatefulSets follow the packing), then the restart's
    assert patches == [(f"{BASE}-tmanager", 1), (f"{BASE}-executors", 2)] * 2
    assert [m for m, *_ in rec.calls][:2] == ["PATCH", "PATCH"]
    assert [p.rsplit("/", 1)[-1] for m, p, *_ in rec.calls if m == "DELETE"] == [
        f"{BASE}-tmanager-0", f"{BASE}-executors-0", f"{BASE}-executors-1"]
    topo = state.get_topology("wc")
    assert topo is not None and topo.component("count").par == 3
    assert topo.component("count").config["topology.component.max.parallelism"] == 128
    assert sorted(t.component for t in state.get_packing_plan("wc").tasks) == ["count", "count", "count", "words"]


def test_a_spout_with_checkpointed_state_is_refused_before_any_api_call(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HERON_PY_HOME", str(tmp_path))
    rec, sched, state = _setup(tmp_path)
    storage = LocalFsStorage(tmp_path / "ckpt", secret=state.get_checkpoint_key("wc"))
    storage.save("wc", 1, 1, b"state")
    storage.mark_complete("wc", 1, [1], {"words": (1,), "count": (2, 3)})
    with pytest.raises(SubmitError) as e:
        update_topology(state, sched, "wc", {"words": 2}, wait_s=0.1)
    assert str(e.value) == (
        "update: topology 'wc' is EFFECTIVELY_ONCE and component 'words' keeps checkpointed state that cannot be "
        "split from 1 to 2 tasks: its inputs are not all fields grouped, so its state is not known to be keyed; "
        "expected a component whose every input is fields grouped, or topology.component.state.rescale: merge in "
        "its config (every new task gets every old task's entries)")
    assert rec.calls == []
    # a stateless spout's resize is no state change: nothing in any checkpoint is its
    storage.mark_complete("wc", 2, [], {"words": (1,), "count": (2, 3)})
    storage.remove("wc", [1])
    with pytest.raises(SubmitError) as e:
        update_topology(state, sched, "wc", {"words": 2}, wait_s=0.1)
    assert str(e.value).startswith("topology 'wc' did not come back")


def test_a_live_rescale_patches_the_statefulsets_and_deletes_no_pod(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """At least once, update is live: the executors in the running pods start and stop the
    tasks, and the StatefulSets only follow the new packing (OnDelete: no pod changes now)."""
    from dataclasses import replace

    from heron_py.planner.packing import repack

    monkeypatch.setenv("HERON_PY_HOME", str(tmp_path))
    rec, sched, state = _setup(tmp_path)
    topo = state.get_topology("wc")
    packing = state.get_packing_plan("wc")
    assert topo is not None and packing is not None
    grown = replace(topo, components=tuple(replace(c, par=4) if c.name == "count" else c for c in topo.components))
    state.set_packing_plan("wc", repack(packing, grown))
    sched.packing_changed("wc")
    assert [m for m, *_ in rec.calls] == ["PATCH", "PATCH"]
    sizes = [b["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"] for m, _, _, b, _ in rec.calls]
    before = Recorder()
    sched2 = KubernetesScheduler(state, tmp_path, options=kr.KubeOptions(namespace=NS, image="heron-py:0.1"),
                                 api_factory=lambda _: kube_api(before))
    state.set_packing_plan("wc", packing)
    sched2.packing_changed("wc")
    old = [b["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"] for m, _, _, b, _ in before.calls]
    assert sizes != old  # the requests follow the packing: 5 tasks over 3 containers, not 3
