"""The KafkaSpout's processing guarantees in one process against a real broker (Tansu), the
spout driven as the instance drives it (initialize, next_tuple, ack, close) with its emit bound
to a list, as the instance binds its fast emit: what each mode commits, read back from the
broker with the real client.

- NO_GUARANTEE: no record is tracked; the consumed position is committed (periodically and at
  close), so the group's commit reaches the log end;
- AT_MOST_ONCE: each poll batch is committed before any of it is emitted;
- AT_LEAST_ONCE: nothing is committed past an unacked record; once all are acked, the commit
  reaches the log end.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest

from heron_py.connectors.kafka import KafkaSpout
from tests.kafka_broker import broker_or_skip
from tests.support import wait_for

pytestmark = pytest.mark.integration
N = 1_500


class _Context:
    """What the spout reads of its TopologyContext: one task of one component."""

    def get_component_id(self) -> str:
        return "kafka"

    def get_topology_name(self) -> str:
        return "modes"

    def get_task_id(self) -> int:
        return 1

    def get_component_tasks(self, _comp: str) -> list[int]:
        return [1]

    def register_metric(self, *_args: Any) -> None:
        """The test reads metrics_snapshot() itself."""


class _Delegate:
    logger = logging.getLogger("test_kafka_modes")

    def log(self, message: str, level: Any = None) -> None:
        self.logger.info(message)


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = broker_or_skip(tmp_path_factory.mktemp("tansu"))
    b.create_topic("modes", 2)
    for p in (0, 1):
        b.produce("modes", [(f"k{i}".encode(), f"p{p} r{i}".encode()) for i in range(N // 2)], partition=p)
    yield b
    b.stop()


def _spout(broker, mode: str, group: str) -> tuple[KafkaSpout, list[tuple[list[Any], Any]]]:
    spout = KafkaSpout(_Delegate())  # type: ignore[arg-type]
    spout.initialize({"kafka.bootstrap.servers": broker.bootstrap, "kafka.topics": ["modes"], "kafka.group.id": group,
                      "kafka.processing.guarantee": mode, "kafka.first.poll.offset.strategy": "EARLIEST",
                      "kafka.max.poll.records": 200, "kafka.offset.commit.period.ms": 60_000,
                      "topology.reliability.mode": "ATLEAST_ONCE" if mode == "AT_LEAST_ONCE" else "ATMOST_ONCE"},
                     _Context())
    out: list[tuple[list[Any], Any]] = []
    spout.emit = lambda tup, tup_id=None, stream="default", **_kw: out.append((tup, tup_id))  # type: ignore
    return spout, out


def _all_values(out):
    return sorted(v[4] for v, _ in out)


EXPECTED = sorted(f"p{p} r{i}" for p in (0, 1) for i in range(N // 2))


def test_no_guarantee_tracks_nothing_and_commits_the_consumed_position(broker):
    spout, out = _spout(broker, "NO_GUARANTEE", "ng")
    try:
        wait_for(lambda: spout.next_tuple() or len(out) >= N, 30, f"{N} records emitted", every=0)
        assert _all_values(out) == EXPECTED and all(tid is None for _, tid in out)
        assert spout.source.in_flight() == 0, "NO_GUARANTEE kept records in flight"
        assert spout.metrics_snapshot()["records"] == N
    finally:
        spout.close()  # commits synchronously
    assert broker.committed("ng", "modes") == {0: N // 2, 1: N // 2}


def test_at_most_once_commits_each_batch_before_emitting_it(broker):
    spout, out = _spout(broker, "AT_MOST_ONCE", "amo")
    try:
        while not out:
            spout.next_tuple()
        # the first batch is out: its end is committed on the broker already
        ends: dict[int, int] = {}
        for v, _ in out:
            ends[v[1]] = max(ends.get(v[1], 0), v[2] + 1)
        committed = broker.committed("amo", "modes")
        assert all(committed[p] >= end for p, end in ends.items()), (committed, ends)
        wait_for(lambda: spout.next_tuple() or len(out) >= N, 30, f"{N} records emitted", every=0)
        assert _all_values(out) == EXPECTED and spout.source.in_flight() == 0
    finally:
        spout.close()
    assert broker.committed("amo", "modes") == {0: N // 2, 1: N // 2}


def test_at_least_once_commits_only_acked_offsets(broker):
    spout, out = _spout(broker, "AT_LEAST_ONCE", "alo")
    try:
        wait_for(lambda: spout.next_tuple() or len(out) >= N, 30, f"{N} records emitted", every=0)
        assert _all_values(out) == EXPECTED
        held = next(tid for values, tid in out if values[:3] == ["modes", 0, 100])  # (topic, partition, offset)
        for _, tid in out:
            if tid != held:
                spout.ack(tid)
        spout._commit(sync=True)
        assert broker.committed("alo", "modes") == {0: 100, 1: N // 2}  # stops below the unacked record
        spout.ack(held)
    finally:
        spout.close()
    assert broker.committed("alo", "modes") == {0: N // 2, 1: N // 2}
