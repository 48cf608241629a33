"""A restore inside a live task process makes the component anew and runs its set-up again
(init_state, initialize, activate), as Heron's instance does. What the first component set up
through the context (its metrics, its task hooks) and its config dict must not leak into the
second: a metric registered twice was an error, so every connector task crashed at every
restore and recovered only by being relaunched. Each connector is restored three times in
process here (against a dead address: set-up must not need the server)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from heron_py.api.bolt.bolt import Bolt
from heron_py.api.metrics import CountMetric
from heron_py.api.spout.spout import Spout
from heron_py.api.stream import Grouping
from heron_py.api.task_hook import ITaskHook
from heron_py.api.topology import TopologyBuilder
from heron_py.checkpoint.storage import LocalFsStorage
from heron_py.planner.model import PhysicalPlan, StmgrLocation, TopologyState
from heron_py.planner.packing import round_robin
from heron_py.runtime.host import HostOptions, make_host
from heron_py.runtime.stateful import StatefulTask
from tests.redis_server import free_port

LOG = logging.getLogger("test")


class Words(Spout):
    outputs = ["id", "word"]

    def next_tuple(self) -> None:
        pass


class Hook(ITaskHook):
    def prepare(self, conf: Any, context: Any) -> None:
        pass

    def clean_up(self) -> None:
        pass


class SetsUp(Bolt):
    """Registers a metric and a hook, and changes its config, in initialize()."""

    outputs = ["word"]

    def initialize(self, config: dict[str, Any], context: Any) -> None:
        assert "mine" not in config  # each component gets the config as the topology set it
        config["mine"] = True
        self.seen = CountMetric()
        context.register_metric("seen", self.seen, 10)
        context.add_task_hook(Hook())

    def process(self, tup: Any) -> None:
        self.seen.incr()


def _plan(kind: str, cls: type, conf: dict[str, Any]) -> PhysicalPlan:
    b = TopologyBuilder("eo")
    if kind == "spout":
        b.add_spout("c", cls, par=1, config=conf)
    else:
        s = b.add_spout("src", Words, par=1)
        b.add_bolt("c", cls, par=1, inputs={s: Grouping.SHUFFLE}, config=conf)
    b.set_config({"topology.reliability.mode": "EFFECTIVELY_ONCE"})
    topo = b.build()
    return PhysicalPlan(topo, round_robin(topo, 1), (StmgrLocation(0, "h", 1, 2),), TopologyState.RUNNING, 1)


def _restore_three_times(plan: PhysicalPlan, tmp_path: Path) -> Any:
    task = plan.packing.tasks_of("c")[0]
    host = make_host(plan, task, lambda frames: None, HostOptions())
    rt = StatefulTask(host, LocalFsStorage(tmp_path / "ckpt"), "eo", lambda frames: None, align_bytes=1 << 20,
                      log=LOG)
    users = []
    auto = []  # heronpy's process-wide counter: registered once per process, kept by every context
    try:
        for restore_id in (1, 2, 3):
            rt.restore(restore_id, 0)
            users.append(host.user)
            auto.append(host.context.registered_metrics.get("__auto__"))
            assert rt.phase.name == "RESTORED", f"restore {restore_id} failed"
    finally:
        host.close()  # the last component's close() or cleanup(), as at a task's end
    assert len({id(u) for u in users}) == 3  # a new component each time
    assert auto[0] == auto[1] == auto[2]
    return host


def _own(host: Any) -> list[str]:
    return sorted(n for n in host.context.registered_metrics if n != "__auto__")


def test_a_component_sets_up_again_on_a_fresh_context(tmp_path: Path) -> None:
    host = _restore_three_times(_plan("bolt", SetsUp, {}), tmp_path)
    assert _own(host) == ["seen"]
    assert host.context.registered_metrics["seen"][0] is host.user.seen  # the new component's metric
    assert len(host.context.task_hooks) == 1
    host.user.process(None)
    host.collect_user_metrics(0.0)
    host.collect_user_metrics(10.0)
    assert host.user_metrics["seen"] == 1  # what is reported is the new component's count


def _dead() -> int:
    return free_port()


CONNECTORS: dict[str, tuple[str, str, str, Any, list[str]]] = {
    # name: (module, class, spout or bolt, config given the test's folder, its metrics)
    "files": ("heron_py.connectors.files", "FileTailSpout", "spout",
              lambda d: {"files.dir": str(d / "in")}, ["files"]),
    "kafka-spout": ("heron_py.connectors.kafka", "KafkaSpout", "spout",
                    lambda d: {"kafka.bootstrap.servers": f"127.0.0.1:{_dead()}", "kafka.topics": ["t"],
                               "kafka.group.id": "g"}, ["kafka"]),
    "kafka-bolt": ("heron_py.connectors.kafka", "KafkaBolt", "bolt",
                   lambda d: {"kafka.bootstrap.servers": f"127.0.0.1:{_dead()}", "kafka.topic": "t"}, []),
    "redis-spout": ("heron_py.connectors.redis", "RedisStreamSpout", "spout",
                    lambda d: {"redis.port": _dead(), "redis.stream": "s"}, ["redis"]),
    "redis-bolt": ("heron_py.connectors.redis", "RedisStreamBolt", "bolt",
                   lambda d: {"redis.port": _dead(), "redis.stream": "s"}, ["redis"]),
    "postgres": ("heron_py.connectors.postgres", "PostgresInsertBolt", "bolt",
                 lambda d: {"postgres.port": _dead(), "postgres.table": "t"}, ["postgres"]),
    "rabbitmq-spout": ("heron_py.connectors.rabbitmq", "RabbitMQSpout", "spout",
                       lambda d: {"rabbitmq.port": _dead(), "rabbitmq.queue": "q"}, ["rabbitmq"]),
    "rabbitmq-bolt": ("heron_py.connectors.rabbitmq", "RabbitMQBolt", "bolt",
                      lambda d: {"rabbitmq.port": _dead(), "rabbitmq.routing.key": "q"}, ["rabbitmq"]),
}


@pytest.mark.parametrize("name", sorted(CONNECTORS))
def test_every_connector_survives_restores_in_process(name: str, tmp_path: Path) -> None:
    module, cls_name, kind, conf, metrics = CONNECTORS[name]
    mod = pytest.importorskip(module)
    (tmp_path / "in").mkdir()
    host = _restore_three_times(_plan(kind, getattr(mod, cls_name), conf(tmp_path)), tmp_path)
    assert _own(host) == metrics
