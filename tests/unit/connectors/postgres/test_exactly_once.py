"""PostgresInsertBolt under EFFECTIVELY_ONCE against a real PostgreSQL: each input is written
exactly once through a task killed between its checkpoint's save (the pre-commit) and the
master's word that the checkpoint completed (the commit), a server restarted mid-checkpoint,
late and repeated notifications, a zombie task of the rolled-back run, and a row the table
refuses. The task runs as in an instance: its StatefulTask over a real component host and real
checkpoint storage; a restore is a new host (the process the executor relaunches)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from heron_py.api.bolt.bolt import Bolt
from heron_py.api.spout.spout import Spout
from heron_py.api.stream import Grouping
from heron_py.api.topology import TopologyBuilder
from heron_py.checkpoint.storage import LocalFsStorage
from heron_py.common.framing import MsgType, encode_batch_frame, frame_type
from heron_py.common.serialization import dumps_batch
from heron_py.connectors.postgres import PostgresInsertBolt, PostgresLookupBolt
from heron_py.planner.model import PhysicalPlan, StmgrLocation, TopologyState
from heron_py.planner.packing import round_robin
from heron_py.runtime.host import HostOptions, make_host
from proto import heron_py_pb2 as pb
from tests.connector_support import SinkTask
from tests.postgres_server import PostgresServer, postgres_or_skip
from tests.support import mark_saved


class Words(Spout):
    outputs = ["word", "n"]

    def next_tuple(self) -> None:
        pass


@pytest.fixture(scope="module")
def pg() -> Iterator[PostgresServer]:
    s = postgres_or_skip()
    yield s
    s.destroy()


@pytest.fixture
def table(pg: PostgresServer) -> str:
    pg.execute("DROP TABLE IF EXISTS eo_words")
    pg.execute("DROP TABLE IF EXISTS heron_py_sink_progress")
    pg.execute("CREATE TABLE eo_words (word text NOT NULL, n int NOT NULL CHECK (n >= 0))")  # no key: a
    return "eo_words"  # second write of a row would show


def _plan(pg: PostgresServer, table: str) -> PhysicalPlan:
    b = TopologyBuilder("eo")
    s = b.add_spout("words", Words, par=1)
    b.add_bolt("sink", PostgresInsertBolt, par=1, inputs={s: Grouping.SHUFFLE},
               config={"postgres.url": pg.url, "postgres.table": table, "postgres.reconnect.initial.ms": 1,
                       "postgres.reconnect.max.ms": 1})
    b.set_config({"topology.reliability.mode": "EFFECTIVELY_ONCE"})
    topo = b.build()
    return PhysicalPlan(topo, round_robin(topo, 1), (StmgrLocation(0, "h", 1, 2),), TopologyState.RUNNING, 1)


class Task(SinkTask):
    def poll(self) -> None:
        self.host.user.heron_poll()

    @property
    def counts(self) -> dict[str, int]:
        return dict(self.host.user.counts)


def _rows(pg: PostgresServer, table: str) -> list[tuple[str, int]]:
    return sorted((w, n) for w, n in pg.execute(f"SELECT word, n FROM {table}"))


def test_a_kill_between_the_pre_commit_and_the_commit_writes_each_row_once(pg: PostgresServer, table: str,
                                                                           tmp_path: Path) -> None:
    storage = LocalFsStorage(tmp_path / "ckpt")
    plan = _plan(pg, table)
    old = Task(plan, storage)
    old.start(1, 0)
    old.words(("a", 1), ("b", 2), ("c", 3))
    old.barrier(5)  # saved: checkpoint 5 holds the staged batch
    mark_saved(storage, "eo", 5)  # the master completed it...
    old.words(("d", 4))  # ...and the run went on past it
    assert _rows(pg, table) == []  # nothing leaves before the master's word
    # killed before the notification reached it: the relaunched task restores checkpoint 5
    new = Task(plan, storage)
    new.start(2, 5)
    new.poll()  # the restored checkpoint's batch is due at once
    assert _rows(pg, table) == [("a", 1), ("b", 2), ("c", 3)]
    new.rt.checkpoint_committed(5)  # a late notification
    old.rt.checkpoint_committed(5)  # and the old run's zombie gets one too
    assert _rows(pg, table) == [("a", 1), ("b", 2), ("c", 3)]
    assert old.counts["skipped-checkpoints"] == 1
    new.words(("d", 4), ("e", 5))  # the spout's replay of what followed checkpoint 5
    new.barrier(9)
    new.rt.checkpoint_committed(9)
    assert _rows(pg, table) == [("a", 1), ("b", 2), ("c", 3), ("d", 4), ("e", 5)]
    assert pg.execute("SELECT sink, task, checkpoint FROM heron_py_sink_progress") == [("eo/sink", new.me, 9)]


def test_a_rolled_back_run_writes_nothing(pg: PostgresServer, table: str, tmp_path: Path) -> None:
    """Staged after the restored checkpoint: gone with its run, never written."""
    storage = LocalFsStorage(tmp_path / "ckpt")
    plan = _plan(pg, table)
    old = Task(plan, storage)
    old.start(1, 0)
    old.words(("a", 1))
    old.barrier(5)  # saved, but never completed (a task elsewhere failed first)
    new = Task(plan, storage)
    new.start(2, 0)  # the restore goes back to a clean start
    new.poll()
    old.rt.checkpoint_committed(4)  # an older checkpoint's word, for the zombie: not its batch
    assert _rows(pg, table) == []


def test_a_server_restarted_mid_checkpoint_delays_the_commit_and_loses_nothing(pg: PostgresServer, table: str,
                                                                               tmp_path: Path) -> None:
    storage = LocalFsStorage(tmp_path / "ckpt")
    t = Task(_plan(pg, table), storage)
    t.start(1, 0)
    t.words(("a", 1))
    t.barrier(3)
    t.rt.checkpoint_committed(3)
    t.words(("b", 2))
    t.barrier(4)
    pg.stop()
    try:
        t.rt.checkpoint_committed(4)  # the server is down: kept, retried
        assert t.counts["connection-errors"] == 1 and t.host.user.heron_busy()
    finally:
        pg.start()
    deadline = time.monotonic() + 20
    while t.host.user.heron_busy() and time.monotonic() < deadline:
        time.sleep(0.01)
        t.poll()
    assert _rows(pg, table) == [("a", 1), ("b", 2)]


def test_a_row_the_table_refuses_is_left_out_and_the_rest_is_written(pg: PostgresServer, table: str,
                                                                     tmp_path: Path) -> None:
    storage = LocalFsStorage(tmp_path / "ckpt")
    t = Task(_plan(pg, table), storage)
    t.start(1, 0)
    t.words(("a", 1), ("bad", -1), ("c", 3))
    t.barrier(3)
    t.rt.checkpoint_committed(3)  # the batch fails on the CHECK: the next try isolates the row
    deadline = time.monotonic() + 10
    while t.host.user.heron_busy() and time.monotonic() < deadline:
        time.sleep(0.01)
        t.poll()
    assert _rows(pg, table) == [("a", 1), ("c", 3)]
    assert t.counts["bad-inputs"] == 1


def test_without_effectively_once_the_bolt_writes_as_before(pg: PostgresServer, table: str) -> None:
    """The staging is only for effectively once: at least once writes each batch as it fills."""
    b = TopologyBuilder("al")
    s = b.add_spout("words", Words, par=1)
    b.add_bolt("sink", PostgresInsertBolt, par=1, inputs={s: Grouping.SHUFFLE},
               config={"postgres.url": pg.url, "postgres.table": table, "postgres.batch.size": 1})
    b.set_config({"topology.reliability.mode": "ATLEAST_ONCE"})
    topo = b.build()
    plan = PhysicalPlan(topo, round_robin(topo, 1), (StmgrLocation(0, "h", 1, 2),), TopologyState.RUNNING, 1)
    task = plan.packing.tasks_of("sink")[0]
    host: Any = make_host(plan, task, lambda frames: None, HostOptions())
    host.initialize()
    assert not host.user.exact
    src = plan.packing.tasks_of("words")[0]
    host.process_frame(encode_batch_frame(task, src, dumps_batch([("default", ["a", 1])]), count=1))
    host.close()
    assert _rows(pg, table) == [("a", 1)]  # written at once, no checkpoint
    assert pg.execute("SELECT to_regclass('heron_py_sink_progress')") == [(None,)]  # no progress kept


class Plain(Bolt):
    outputs: list[Any] = []

    def process(self, tup: Any) -> None:
        pass


def test_a_lookup_keeps_what_the_server_did_not_answer_and_answers_it_before_the_next_barrier(
        pg: PostgresServer, table: str, tmp_path: Path) -> None:
    pg.execute(f"INSERT INTO {table} VALUES ('a', 1)")
    b = TopologyBuilder("eo")
    s = b.add_spout("words", Words, par=1)
    look = PostgresLookupBolt.spec(name="sink", inputs={s: Grouping.SHUFFLE}, par=1, config={
        "postgres.url": pg.url, "postgres.select.query": f"SELECT n FROM {table} WHERE word = %s",
        "postgres.query.fields": ["word"], "postgres.output.fields": ["word", "n"],
        "postgres.reconnect.initial.ms": 1, "postgres.reconnect.max.ms": 1})
    b.add_spec(look)
    b.add_bolt("after", Plain, par=1, inputs={look: Grouping.SHUFFLE})
    b.set_config({"topology.reliability.mode": "EFFECTIVELY_ONCE"})
    topo = b.build()
    plan = PhysicalPlan(topo, round_robin(topo, 1), (StmgrLocation(0, "h", 1, 2),), TopologyState.RUNNING, 1)
    storage = LocalFsStorage(tmp_path / "ckpt")
    t = Task(plan, storage)
    sent = t.sent
    t.start(1, 0)
    pg.stop()
    try:
        t.words(("a", 0))  # the server is down: kept, not failed
        assert t.host.user.heron_busy()
        t.barrier(3)  # not answered: checkpoint 3 fails, the input stays
    finally:
        pg.start()
    saved = [pb.CheckpointSaved.FromString(f[6:]) for f in sent if frame_type(f) == MsgType.CHECKPOINT_SAVED]
    assert [(m.checkpoint_id, m.failed) for m in saved] == [(3, True)]
    t.barrier(4)  # answered now, its tuple ahead of checkpoint 4's marker
    kinds = [frame_type(f) for f in sent]
    saved = [pb.CheckpointSaved.FromString(f[6:]) for f in sent if frame_type(f) == MsgType.CHECKPOINT_SAVED]
    assert [(m.checkpoint_id, m.failed) for m in saved] == [(3, True), (4, False)]
    assert kinds.index(MsgType.TUPLE_BATCH) < len(kinds) - 1 - kinds[::-1].index(MsgType.CKPT_MARKER)
    assert not t.host.user.heron_busy()
