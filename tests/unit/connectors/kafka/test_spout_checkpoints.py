"""The KafkaSpout's group commits under effectively once, with no broker: a stand-in client
(the confluent_kafka names the spout uses, commit callbacks delivered at the next consume as the
real client does) and the spout driven as the instance drives it (init_state, initialize,
next_tuple, pre_save, and the master's word through ``StatefulTask.checkpoint_committed``).

- checkpoint N's positions are not committed before the master says N is complete, then exactly
  they are; a later word M commits M's saved positions, skipping older ones;
- the spout never opens the checkpoint storage (it works with no heron home nor root, and
  writes nothing);
- a restore commits the restored positions of the partitions the task holds, once assigned;
- a failed commit is logged once and retried at the periodic commit until confirmed (or
  superseded by a newer word).

The spout against a real broker through process kills: tests/integration/test_kafka_effectively_once.py."""

from __future__ import annotations

import logging
import sys
import types
from collections import deque
from typing import Any

import pytest

from heron_py.api.state.state import HashMapState
from heron_py.connectors.kafka.spout import POSITIONS_KEY, KafkaSpout
from heron_py.runtime.stateful import Phase, StatefulTask

TOPIC = "t"
PERIOD_S = 30.0  # kafka.offset.commit.period.ms


class TopicPartition:
    def __init__(self, topic: str, partition: int, offset: int = -1001, metadata: str | None = None) -> None:
        self.topic, self.partition, self.offset, self.metadata = topic, partition, offset, metadata
        self.error: Any = None


class Msg:
    def __init__(self, partition: int, offset: int) -> None:
        self._p, self._o = partition, offset

    def error(self) -> None:
        return None

    def topic(self) -> str:
        return TOPIC

    def partition(self) -> int:
        return self._p

    def offset(self) -> int:
        return self._o

    def key(self) -> bytes:
        return b"k"

    def value(self) -> bytes:
        return f"{self._p}:{self._o}".encode()


class Broker:
    """The group's committed offsets and each partition's log, shared by the stand-in clients."""

    def __init__(self, partitions: int = 2) -> None:
        self.partitions = partitions
        self.group: dict[tuple[str, int], int] = {}
        self.log: dict[int, int] = {p: 0 for p in range(partitions)}  # records per partition
        self.commits: list[dict[tuple[str, int], int]] = []  # every commit call that reached the broker
        self.refuse_calls = 0  # the next commit calls raise (the client refuses them)
        self.fail_async = 0  # the next commits reach the broker and fail (reported by the callback)
        self.down = False  # list_topics fails
        self.consumers: list[Consumer] = []


class Consumer:
    broker: Broker

    def __init__(self, conf: dict[str, Any]) -> None:
        self.conf = conf
        self.callbacks: deque[tuple[Any, list[TopicPartition]]] = deque()
        self.position: dict[int, int] = {}
        self.polls: list[tuple[int, float]] = []  # each consume call's (num, timeout)
        self.broker.consumers.append(self)

    def list_topics(self, timeout: float | None = None) -> Any:
        if self.broker.down:
            raise RuntimeError("broker unreachable")
        parts = {p: object() for p in range(self.broker.partitions)}
        return types.SimpleNamespace(topics={TOPIC: types.SimpleNamespace(error=None, partitions=parts)})

    def committed(self, tps: list[TopicPartition], timeout: float | None = None) -> list[TopicPartition]:
        return [TopicPartition(tp.topic, tp.partition, self.broker.group.get((tp.topic, tp.partition), -1001))
                for tp in tps]

    def assign(self, tps: list[TopicPartition]) -> None:
        for tp in tps:
            if tp.offset >= 0:
                self.position[tp.partition] = tp.offset
            elif tp.offset == -2 or tp.partition not in self.position:
                self.position[tp.partition] = 0

    def pause(self, tps: list[TopicPartition]) -> None:
        pass

    def resume(self, tps: list[TopicPartition]) -> None:
        pass

    def consume(self, num: int, timeout: float) -> list[Msg]:
        while self.callbacks:  # the client serves commit callbacks inside consume/poll
            err, tps = self.callbacks.popleft()
            self.conf["on_commit"](err, tps)
        self.polls.append((num, timeout))
        out: list[Msg] = []
        for p, pos in sorted(self.position.items()):
            end = min(self.broker.log[p], pos + num - len(out))  # at most num, as the client
            out += [Msg(p, o) for o in range(pos, end)]
            self.position[p] = end
        return out

    def commit(self, offsets: list[TopicPartition], asynchronous: bool = True) -> Any:
        if self.broker.refuse_calls:
            self.broker.refuse_calls -= 1
            raise RuntimeError("KafkaError{code=_TRANSPORT,str=commit refused}")
        self.broker.commits.append({(tp.topic, tp.partition): tp.offset for tp in offsets})
        err = None
        if self.broker.fail_async:
            self.broker.fail_async -= 1
            err = "KafkaError{code=COORDINATOR_NOT_AVAILABLE}"
        else:
            self.broker.group.update({(tp.topic, tp.partition): tp.offset for tp in offsets})
        done = [TopicPartition(tp.topic, tp.partition, tp.offset, tp.metadata) for tp in offsets]
        if asynchronous:
            self.callbacks.append((err, done))
            return None
        return done

    def get_watermark_offsets(self, tp: TopicPartition, cached: bool = False) -> tuple[int, int]:
        return 0, self.broker.log[tp.partition]

    def close(self) -> None:
        pass


class Context:
    def __init__(self, task_id: int = 1, tasks: tuple[int, ...] = (1,)) -> None:
        self.task_id, self.tasks = task_id, list(tasks)

    def get_component_id(self) -> str:
        return "kafka"

    def get_topology_name(self) -> str:
        return "eo"

    def get_task_id(self) -> int:
        return self.task_id

    def get_component_tasks(self, _comp: str) -> list[int]:
        return self.tasks

    def register_metric(self, *_args: Any) -> None:
        pass


class Delegate:
    logger = logging.getLogger("test_spout_checkpoints")

    def __init__(self) -> None:
        self.lines: list[tuple[str, Any]] = []
        self.emitted: list[Any] = []

    def emit(self, tup: Any, stream: str, anchors: Any, direct_task: Any, need_task_ids: bool, tup_id: Any) -> None:
        self.emitted.append(tup)

    def log(self, message: str, level: Any = None) -> None:
        self.lines.append((message, level))


@pytest.fixture
def broker(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> Broker:
    b = Broker()
    fake = types.ModuleType("confluent_kafka")
    fake.Consumer = type("Consumer", (Consumer,), {"broker": b})  # type: ignore[attr-defined]
    fake.TopicPartition = TopicPartition  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "confluent_kafka", fake)
    # no heron home and no checkpoint root: the spout needs neither (it reads no checkpoint)
    monkeypatch.delenv("HERON_PY_HOME", raising=False)
    monkeypatch.chdir(tmp_path)

    def no_storage(*_a: Any, **_kw: Any) -> Any:
        raise AssertionError("the Kafka spout opened the checkpoint storage")

    import heron_py.checkpoint.select as select

    monkeypatch.setattr(select, "open_checkpoint_storage", no_storage)
    return b


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _spout(restored: list[list[Any]] | None = None, *, mode: str = "EFFECTIVELY_ONCE",
           context: Context | None = None) -> tuple[KafkaSpout, HashMapState, Clock, Delegate]:
    delegate = Delegate()
    spout = KafkaSpout(delegate)
    clock = Clock()
    spout.clock = clock  # type: ignore[method-assign]
    state = HashMapState()
    if restored is not None:
        state.put(POSITIONS_KEY, restored)
    if mode == "EFFECTIVELY_ONCE":
        spout.init_state(state)  # the engine calls it before initialize (an empty state: a clean start)
    spout.initialize({"kafka.bootstrap.servers": "127.0.0.1:1", "kafka.topics": [TOPIC], "kafka.group.id": "g",
                      "kafka.first.poll.offset.strategy": "EARLIEST",
                      "kafka.offset.commit.period.ms": int(PERIOD_S * 1000),
                      "topology.reliability.mode": mode}, context or Context())
    return spout, state, clock, delegate


def _word(spout: KafkaSpout, checkpoint_id: int) -> None:
    """The master's word as the engine delivers it to a processing task."""
    task = StatefulTask.__new__(StatefulTask)
    task.host = types.SimpleNamespace(user=spout)  # type: ignore[assignment]
    task.phase = Phase.PROCESSING
    task.checkpoint_committed(checkpoint_id)


def _run(spout: KafkaSpout, broker: Broker, clock: Clock, records: int = 0, *, periodic: bool = False) -> None:
    """``records`` more on each partition, then next_tuple calls: every record written so far is
    emitted and the commit callbacks due are served (then, when ``periodic``, the clock passes a
    commit period and the spout runs again)."""
    for p in broker.log:
        broker.log[p] += records
    spout.next_tuple()
    if periodic:
        clock.now += PERIOD_S + 1
        spout.next_tuple()
        spout.next_tuple()  # the periodic commit's callback


def _pos(*offsets: int) -> dict[tuple[str, int], int]:
    return {(TOPIC, p): o for p, o in enumerate(offsets)}


def test_positions_are_committed_only_at_the_masters_word_for_their_checkpoint(broker: Broker) -> None:
    spout, state, clock, delegate = _spout()
    _run(spout, broker, clock, 5)
    assert len(delegate.emitted) == 10
    spout.pre_save("1")
    assert state.get(POSITIONS_KEY) == [[TOPIC, 0, 5], [TOPIC, 1, 5]]
    _run(spout, broker, clock, 3, periodic=True)
    spout.pre_save("2")
    _run(spout, broker, clock, 2, periodic=True)
    _run(spout, broker, clock, periodic=True)
    assert broker.commits == []  # saved, not known complete: never committed, periodic point or not

    _word(spout, 1)
    assert broker.commits == [_pos(5, 5)]  # checkpoint 1's, not the newer live positions (10)
    _run(spout, broker, clock, periodic=True)  # the confirmation comes; nothing to retry
    assert broker.commits == [_pos(5, 5)] and broker.group == _pos(5, 5)

    _run(spout, broker, clock, 4)
    spout.pre_save("3")
    _word(spout, 3)  # 2 and 3 complete: 3's positions, 2's skipped
    assert broker.commits == [_pos(5, 5), _pos(14, 14)]
    assert spout._saved == {}
    _run(spout, broker, clock, periodic=True)
    assert broker.group == _pos(14, 14) and len(broker.commits) == 2


def test_a_word_commits_the_newest_saved_at_or_below_it_and_keeps_newer_ones(broker: Broker) -> None:
    spout, _state, clock, _delegate = _spout()
    _word(spout, 1)  # nothing saved yet
    for cid, n in ((2, 3), (3, 4), (5, 2)):
        _run(spout, broker, clock, n)
        spout.pre_save(str(cid))
    _word(spout, 4)  # 4 was never this task's (or was aborted): 3 is the newest at or below it
    assert broker.commits == [_pos(7, 7)]
    assert list(spout._saved) == [5]
    _run(spout, broker, clock)  # the commit's confirmation
    _word(spout, 4)  # a repeated word: nothing new
    _word(spout, 2)  # a late word for an older checkpoint: its positions are gone, nothing moves back
    _run(spout, broker, clock, periodic=True)
    assert broker.commits == [_pos(7, 7)] and broker.group == _pos(7, 7)
    _word(spout, 5)
    assert broker.commits == [_pos(7, 7), _pos(9, 9)]


def test_a_restore_commits_the_restored_positions_once_assigned(broker: Broker) -> None:
    broker.log = {0: 20, 1: 20}
    broker.group = _pos(3, 4)  # older commits: the restored checkpoint is newer
    broker.down = True  # the consumer cannot be assigned yet
    spout, _state, clock, delegate = _spout([[TOPIC, 0, 10], [TOPIC, 1, 12]])
    _run(spout, broker, clock)
    assert broker.commits == []  # nothing assigned: nothing committed yet
    broker.down = False
    clock.now += 5  # the next partition refresh (every 2 s), before the periodic commit
    spout.next_tuple()
    assert broker.commits == [_pos(10, 12)]
    assert broker.consumers[0].position == {0: 20, 1: 20}  # sought to the restored positions, then read
    assert sorted(v[4] for v in delegate.emitted)[:2] == ["0:10", "0:11"]
    assert len(delegate.emitted) == 18
    _run(spout, broker, clock, periodic=True)
    assert broker.group == _pos(10, 12) and len(broker.commits) == 1
    assert any("restored positions t-0@10, t-1@12" in line for line, _ in delegate.lines)


def test_a_restore_commits_only_the_partitions_the_task_holds(broker: Broker) -> None:
    # two tasks: partition 0 is task 1's, partition 1 task 2's (round robin over sorted partitions)
    spout, _state, clock, _delegate = _spout([[TOPIC, 0, 10], [TOPIC, 1, 12]], context=Context(2, (1, 2)))
    broker.log = {0: 10, 1: 12}
    _run(spout, broker, clock)
    assert broker.commits == [{(TOPIC, 1): 12}]


def test_a_clean_start_commits_nothing_before_a_word(broker: Broker) -> None:
    spout, _state, clock, _delegate = _spout([])
    _run(spout, broker, clock, 5, periodic=True)
    spout.close()
    assert broker.commits == []


def test_a_refused_commit_is_logged_once_and_retried_at_the_periodic_commit(broker: Broker) -> None:
    spout, _state, clock, delegate = _spout()
    _run(spout, broker, clock, 5)
    spout.pre_save("1")
    broker.refuse_calls = 2

    def refusals() -> list[str]:
        return [line for line, level in delegate.lines if level == "warn" and "commit refused" in line]
    _word(spout, 1)
    for _ in range(5):
        _run(spout, broker, clock)  # before the period: no retry, no other line
    assert broker.commits == [] and broker.refuse_calls == 1
    assert len(refusals()) == 1
    _run(spout, broker, clock, periodic=True)  # refused again: one line for the retry
    assert broker.commits == [] and broker.refuse_calls == 0 and len(refusals()) == 2
    _run(spout, broker, clock, periodic=True)
    assert broker.commits == [_pos(5, 5)]
    _run(spout, broker, clock, periodic=True)  # confirmed: not committed again
    assert broker.commits == [_pos(5, 5)] and broker.group == _pos(5, 5) and len(refusals()) == 2


def test_a_commit_the_broker_fails_is_retried_until_confirmed(broker: Broker) -> None:
    spout, _state, clock, delegate = _spout()
    _run(spout, broker, clock, 5)
    spout.pre_save("1")
    broker.fail_async = 1
    _word(spout, 1)
    _run(spout, broker, clock)  # the failure comes back in the commit callback
    assert broker.group == {}
    assert any(level == "warn" and "COORDINATOR_NOT_AVAILABLE" in line for line, level in delegate.lines)
    _run(spout, broker, clock, periodic=True)
    _run(spout, broker, clock, periodic=True)
    assert broker.commits == [_pos(5, 5), _pos(5, 5)] and broker.group == _pos(5, 5)


def test_a_newer_word_supersedes_a_failed_commit(broker: Broker) -> None:
    spout, _state, clock, _delegate = _spout()
    _run(spout, broker, clock, 5)
    spout.pre_save("1")
    broker.refuse_calls = 1
    _word(spout, 1)
    _run(spout, broker, clock, 2)
    spout.pre_save("2")
    _word(spout, 2)
    _run(spout, broker, clock, periodic=True)
    assert broker.commits == [_pos(7, 7)] and broker.group == _pos(7, 7)


def test_the_spout_reads_and_writes_no_checkpoint(broker: Broker, tmp_path: Any) -> None:
    spout, _state, clock, _delegate = _spout([[TOPIC, 0, 0]])
    _run(spout, broker, clock, 5)
    spout.pre_save("1")
    _word(spout, 1)
    _run(spout, broker, clock, periodic=True)
    spout.close()
    assert broker.group == _pos(5, 5)
    assert not hasattr(spout, "_storage")
    assert list(tmp_path.iterdir()) == []  # no checkpoints/ folder under the working directory


@pytest.mark.parametrize("mode", ["ATLEAST_ONCE", "ATMOST_ONCE"])
def test_other_modes_ignore_a_word(broker: Broker, mode: str) -> None:
    spout, _state, clock, _delegate = _spout(mode=mode)
    spout.on_checkpoint_complete(1)
    _run(spout, broker, clock, 5)
    spout.on_checkpoint_complete(2)
    assert broker.commits == []  # their commits are periodic (none came yet), whatever the word
    assert not hasattr(spout, "_saved")
