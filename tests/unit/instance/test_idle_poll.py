"""A polled component's idle interval (``heron_idle_poll_interval_s``, api/contracts.py): the task's
loop polls it every ``heron_poll_interval_s`` while it says it is busy and at the idle interval
while it says it is not, so an idle KafkaBolt does not wake 200 times a second for reports that
cannot come. The host's choice first (pure), then a bolt's real execution loop with its queues."""

from __future__ import annotations

import threading
from typing import Any

from heron_py.api.bolt.bolt import Bolt
from heron_py.api.stream import Grouping
from heron_py.api.topology import TopologyBuilder
from heron_py.connectors.kafka.bolt import KafkaBolt
from heron_py.planner.model import PhysicalPlan, StmgrLocation, TopologyState
from heron_py.planner.packing import round_robin
from tests.unit.instance.test_queues import IdleSpout, _Task


class PolledSink(Bolt):
    """Counts its polls; busy while the test says so."""

    outputs: list[str] = []
    heron_poll_interval_s = 0.005
    heron_idle_poll_interval_s = 0.1

    def initialize(self, config: dict[str, Any], context: Any) -> None:
        self.polls = 0
        self.busy = False

    def process(self, tup: Any) -> None:
        pass

    def heron_poll(self) -> None:
        self.polls += 1

    def heron_busy(self) -> bool:
        return self.busy


class NoIdleSink(PolledSink):
    """Names no idle interval: polled at its interval, busy or not (the contract's default)."""

    heron_idle_poll_interval_s = None  # type: ignore[assignment]


def _plan(bolt: type[Bolt]) -> PhysicalPlan:
    b = TopologyBuilder("idle_poll")
    s = b.add_spout("spout", IdleSpout, par=1, config={"burst": 0})
    b.add_bolt("sink", bolt, par=1, inputs={s: Grouping.SHUFFLE})
    topo = b.build()
    return PhysicalPlan(topo, round_robin(topo, 1), (StmgrLocation(0, "h", 1, 2),), TopologyState.RUNNING, 1)


class _BoltTask:
    """The sink's task in test_queues' harness, started, with its bolt at hand."""

    def __init__(self, plan: PhysicalPlan) -> None:
        self.task = _Task(plan, out_batches=64, component="sink")
        self.runner = self.task.runner
        self.task.thread.start()
        self.task.wait_for(lambda: self.runner.reports.host is not None, "the host")
        host = self.runner.reports.host
        assert host is not None
        self.bolt: PolledSink = host.user

    def polls_in(self, seconds: float) -> int:
        before = self.bolt.polls
        threading.Event().wait(seconds)
        return self.bolt.polls - before

    def stop(self) -> None:
        self.runner.stop()
        self.task.thread.join(timeout=10)
        assert not self.task.thread.is_alive()


def test_the_host_waits_the_idle_interval_only_while_the_component_is_not_busy(stand_in_main: None) -> None:
    task = _BoltTask(_plan(PolledSink))
    try:
        host = task.runner.reports.host
        assert host is not None
        assert (host.poll_s, host.idle_poll_s) == (0.005, 0.1)
        assert host.poll_wait() == 0.1
        task.bolt.busy = True
        assert host.poll_wait() == 0.005
    finally:
        task.stop()


def test_an_idle_component_is_polled_at_its_idle_interval_and_a_busy_one_at_its_interval(
        stand_in_main: None) -> None:
    task = _BoltTask(_plan(PolledSink))
    try:
        idle = task.polls_in(1.0)
        task.bolt.busy = True
        task.polls_in(0.2)  # the wait under way when it turned busy ends first
        busy = task.polls_in(1.0)
    finally:
        task.stop()
    # idle: ~10 a second (the 100 ms interval, which is also the loop's own longest wait);
    # busy: up to 200 a second at 5 ms
    assert 1 <= idle <= 25, idle
    assert busy >= 60, busy


def test_a_component_without_an_idle_interval_is_polled_at_its_interval_when_idle(stand_in_main: None) -> None:
    task = _BoltTask(_plan(NoIdleSink))
    try:
        host = task.runner.reports.host
        assert host is not None and host.idle_poll_s is None and host.poll_wait() == 0.005
        idle = task.polls_in(1.0)
    finally:
        task.stop()
    assert idle >= 60, idle


def test_the_kafka_bolt_is_busy_exactly_while_a_record_waits_for_its_report() -> None:
    """Its idle interval is safe because ``heron_busy`` is true from the produce of a tracked
    input until its delivery report: the 5 ms polls cover every record in flight."""
    assert (KafkaBolt.heron_poll_interval_s, KafkaBolt.heron_idle_poll_interval_s) == (0.005, 0.1)
    bolt = KafkaBolt.__new__(KafkaBolt)
    from heron_py.connectors.kafka.inflight import InFlight

    bolt.inflight = InFlight()
    assert not bolt.heron_busy()
    ident = bolt.inflight.add(object(), 0.0)
    assert bolt.heron_busy()
    bolt.inflight.pop(ident)
    assert not bolt.heron_busy()
