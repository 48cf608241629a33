"""The Redis bolts under EFFECTIVELY_ONCE against a real redis-server. The stream and store
bolts write each input exactly once (a checkpoint's commands with the task's progress in one
MULTI/EXEC, after the checkpoint completed): through a task killed between its checkpoint's
save and the master's word, a late word, the old run's zombie, a server restarted mid-checkpoint
(INCRBY counts stay exact). The lookup bolt answers every input from before a barrier before it
passes, and keeps what the server did not answer. The task runs as in an instance: its
StatefulTask over a real component host and checkpoint storage; a restore is a new host."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from heron_py.api.bolt.bolt import Bolt
from heron_py.api.spout.spout import Spout
from heron_py.api.stream import Grouping
from heron_py.api.topology import TopologyBuilder
from heron_py.checkpoint.storage import LocalFsStorage
from heron_py.common.framing import MsgType, frame_type
from heron_py.connectors.redis import RedisLookupBolt, RedisStoreBolt, RedisStreamBolt
from heron_py.planner.model import PhysicalPlan, StmgrLocation, TopologyState
from heron_py.planner.packing import round_robin
from tests.connector_support import SinkTask
from tests.support import mark_saved


class Words(Spout):
    outputs = ["word", "n"]

    def next_tuple(self) -> None:
        pass


class Plain(Bolt):
    outputs: list[Any] = []

    def process(self, tup: Any) -> None:
        pass


def _plan(bolt: Any, conf: dict[str, Any]) -> PhysicalPlan:
    b = TopologyBuilder("eo")
    s = b.add_spout("words", Words, par=1)
    conf = {"redis.reconnect.initial.ms": 1, "redis.reconnect.max.ms": 1, "redis.timeout.ms": 500, **conf}
    spec = bolt.spec(name="sink", inputs={s: Grouping.SHUFFLE}, par=1, config=conf)
    b.add_spec(spec)
    if spec.outputs:  # a lookup's tuples need a consumer to be sent
        b.add_bolt("after", Plain, par=1, inputs={spec: Grouping.SHUFFLE})
    b.set_config({"topology.reliability.mode": "EFFECTIVELY_ONCE"})
    topo = b.build()
    return PhysicalPlan(topo, round_robin(topo, 1), (StmgrLocation(0, "h", 1, 2),), TopologyState.RUNNING, 1)


Task = SinkTask


STORE = {"redis.data.type": "HINCRBY", "redis.additional.key": "counts", "redis.key.field": "word",
         "redis.value.field": "n"}


def test_counts_stay_exact_through_a_kill_between_the_save_and_the_word(server: Any, r: Any, tmp_path: Path) -> None:
    storage = LocalFsStorage(tmp_path / "ckpt")
    plan = _plan(RedisStoreBolt, {"redis.url": server.url, **STORE})
    old = Task(plan, storage)
    old.start(1, 0)
    old.words(("a", 1), ("b", 2), ("a", 3))
    old.barrier(5)
    mark_saved(storage, "eo", 5)
    old.words(("a", 100))  # after checkpoint 5: rolled back
    assert r.hgetall("counts") == {}  # nothing before the master's word
    new = Task(plan, storage)
    new.start(2, 5)
    new.host.user.heron_poll()  # the restored checkpoint's commands are due at once
    assert r.hgetall("counts") == {b"a": b"4", b"b": b"2"}
    old.rt.checkpoint_committed(5)  # the zombie's late word
    new.rt.checkpoint_committed(5)
    assert r.hgetall("counts") == {b"a": b"4", b"b": b"2"}
    new.words(("a", 100))  # the replay
    new.barrier(9)
    new.rt.checkpoint_committed(9)
    assert r.hgetall("counts") == {b"a": b"104", b"b": b"2"}
    assert old.host.user.counts["skipped-checkpoints"] == 1


def test_a_stream_bolt_rides_out_a_server_restart_mid_checkpoint(server: Any, r: Any, tmp_path: Path) -> None:
    storage = LocalFsStorage(tmp_path / "ckpt")
    t = Task(_plan(RedisStreamBolt, {"redis.url": server.url, "redis.stream": "out"}), storage)
    t.start(1, 0)
    t.words(("a", 1))
    t.barrier(3)
    server.stop()
    try:
        t.rt.checkpoint_committed(3)  # refused: kept, retried
        assert t.host.user.counts["connection-errors"] >= 1 and t.host.user.heron_busy()
    finally:
        server.start()
    deadline = time.monotonic() + 20
    while t.host.user.heron_busy() and time.monotonic() < deadline:
        time.sleep(0.01)
        t.host.user.heron_poll()
    assert [f[b"word"] for _id, f in r.xrange("out")] == [b"a"]


def test_a_lookup_answers_its_inputs_before_the_barrier_passes_or_the_checkpoint_fails(server: Any, r: Any,
                                                                                      tmp_path: Path) -> None:
    storage = LocalFsStorage(tmp_path / "ckpt")
    conf = {"redis.url": server.url, "redis.data.type": "STRING", "redis.key.field": "word",
            "redis.output.fields": ["word", "value"], "redis.batch.size": 100, "redis.batch.delay.ms": 60_000}
    r.set("a", "1")
    t = Task(_plan(RedisLookupBolt, conf), storage)
    t.start(1, 0)
    t.words(("a", 0))  # batched: the delay is a minute
    t.host.flush()
    emitted_before = sum(1 for f in t.sent if frame_type(f) == MsgType.TUPLE_BATCH)
    assert emitted_before == 0
    t.barrier(4)  # the batch is answered, and its tuples go ahead of the checkpoint's markers
    kinds = [frame_type(f) for f in t.sent]
    assert MsgType.TUPLE_BATCH in kinds and kinds.index(MsgType.TUPLE_BATCH) < kinds.index(MsgType.CKPT_MARKER)
    assert t.saved() == [(4, False)]
    with server.frozen():
        t.words(("a", 0))
        t.barrier(5)  # the server does not answer: checkpoint 5 fails, the input stays
        assert t.saved()[-1] == (5, True)
        assert t.host.user.heron_busy()
    t.sent.clear()
    t.barrier(6)
    assert t.saved() == [(6, False)]
    assert any(frame_type(f) == MsgType.TUPLE_BATCH for f in t.sent)  # answered now, before checkpoint 6
