"""Effectively once refuses what would lose state (issue 37, hole 1): droptuples mode drops
tuples by design."""

from __future__ import annotations

from pathlib import Path

import pytest

from heron_py.common.config import ConfigError, check_topology_config


def test_droptuples_with_effectively_once_is_refused_at_submit() -> None:
    with pytest.raises(ConfigError) as e:
        check_topology_config({"topology.reliability.mode": "EFFECTIVELY_ONCE",
                               "topology.droptuples.upon.backpressure": "true"}, {})
    assert str(e.value) == ("config topology.droptuples.upon.backpressure: EFFECTIVELY_ONCE never drops tuples (a "
                            "drop would be lost state); expected false, found true")
    check_topology_config({"topology.reliability.mode": "ATLEAST_ONCE",
                           "topology.droptuples.upon.backpressure": "true"}, {})


def test_effectively_once_on_kubernetes_needs_a_shared_checkpoint_root() -> None:
    """Each pod's heron home is an emptyDir of its own: checkpoints there are neither seen by the
    master nor kept past the pod (heron_py/scheduler/kube.py, checkpoint_root_problem)."""
    from heron_py.scheduler.kube import checkpoint_root_problem

    eo = {"topology.reliability.mode": "EFFECTIVELY_ONCE"}
    head = ("kubernetes scheduler: topology 'wc' is EFFECTIVELY_ONCE, whose checkpoints must be in one folder every "
            "pod shares (each pod's /var/lib/heron-py is its own emptyDir, lost with the pod); expected "
            "heron_py.checkpoint.root set to the absolute mount path of a volume shared by every pod, found ")
    assert checkpoint_root_problem("wc", eo) == head + "it unset"
    assert checkpoint_root_problem("wc", {**eo, "heron_py.checkpoint.root": "/var/lib/heron-py/ck"}) == (
        head + "'/var/lib/heron-py/ck', inside each pod's own /var/lib/heron-py")
    assert checkpoint_root_problem("wc", {**eo, "heron_py.checkpoint.root": "ckpt"}) == head + "'ckpt', a relative path"
    assert checkpoint_root_problem("wc", {**eo, "heron_py.checkpoint.root": "/mnt/checkpoints"}) is None
    assert checkpoint_root_problem("wc", {"topology.reliability.mode": "ATLEAST_ONCE"}) is None
    assert checkpoint_root_problem("wc", {}) is None


def test_kubernetes_launch_refuses_effectively_once_without_a_shared_root_before_any_call(tmp_path: Path) -> None:
    from heron_py.planner.model import TopologyDef
    from heron_py.scheduler import kube_render as kr
    from heron_py.scheduler.base import SchedulerError
    from heron_py.scheduler.kube import KubernetesScheduler
    from tests.unit.scheduler.test_kube_scheduler import NS, Recorder, kube_api, stored_topology

    rec = Recorder()
    api = kube_api(rec)
    state = stored_topology(tmp_path)
    topo = state.get_topology("wc")
    assert topo is not None
    state.set_topology(TopologyDef("wc", topo.components, {"topology.reliability.mode": "EFFECTIVELY_ONCE"}))
    sched = KubernetesScheduler(state, tmp_path, options=kr.KubeOptions(namespace=NS, image="heron-py:0.1"),
                                api_factory=lambda _: api)
    with pytest.raises(SchedulerError) as e:
        sched.launch("wc", 3)
    assert str(e.value).endswith("expected heron_py.checkpoint.root set to the absolute mount path of a volume "
                                 "shared by every pod, found it unset")
    assert rec.calls == []  # refused before the API server was asked anything
    state.set_topology(TopologyDef("wc", topo.components, {"topology.reliability.mode": "EFFECTIVELY_ONCE",
                                                           "heron_py.checkpoint.root": "/mnt/checkpoints"}))
    sched.launch("wc", 3)
    assert len(rec.calls) == 5
