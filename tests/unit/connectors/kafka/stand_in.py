"""A stand-in for the confluent_kafka client the Kafka spout uses (the names it calls, commit
callbacks delivered at the next consume as the real client does, at most ``num`` records a
consume), and the spout driven as the instance drives it. The ``broker`` fixture
(conftest.py) installs it in place of confluent_kafka."""

from __future__ import annotations

import logging
import types
from collections import deque
from typing import Any

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
