"""The instance's queues wake their waiters instead of polling (instance/queues.py,
instance/execution.py): a sender blocked on a full outbound queue sleeps on the queue's
condition until the gateway takes a flush, and an idle spout loop sleeps on its inbound
queue. Nothing here asserts on wall time: the safety-net timeouts are raised out of reach,
so only a wake-up can end a wait, and wake-ups are counted."""

from __future__ import annotations

import json
import logging
import queue
import threading
from pathlib import Path
from typing import Any

import pytest

import instance.execution as execution
import instance.queues as queues
from heron_py.api.bolt.bolt import Bolt
from heron_py.api.spout.spout import Spout
from heron_py.api.stream import Grouping
from heron_py.api.topology import TopologyBuilder
from heron_py.common.framing import MsgType, encode_batch_frame, encode_frame
from heron_py.planner.model import PhysicalPlan, StmgrLocation, TopologyState
from heron_py.planner.packing import round_robin
from instance.execution import TaskRunner
from instance.metrics import TaskReports
from instance.queues import InItem, InKind, Outbox, OutQueue, QueueBytes, WireLedger, tuples_in

NEVER = 1000.0  # a safety net raised out of reach: only a wake-up ends the wait


def _flush(n_tuples: int, size: int = 100) -> list[bytes]:
    return [encode_batch_frame(2, 1, b"x" * size, count=n_tuples)]


# --- OutQueue: bounds and the condition ------------------------------------------------------

def test_out_queue_is_bounded_in_items_and_bytes_and_one_flush_always_fits() -> None:
    q = OutQueue(maxsize=3, max_bytes=1000)
    assert q.offer([b"a" * 5000], 5000)  # one flush fits an empty queue, however large
    assert not q.offer([b"b" * 10], 10)  # over the byte bound
    assert q.get_nowait() == [b"a" * 5000] and q.depth_bytes == 0
    assert q.offer([b"c" * 400], 400) and q.offer([b"d" * 400], 400)
    assert not q.offer([b"e" * 400], 400)  # 1200 > 1000
    assert q.offer([b"f" * 100], 100)
    assert not q.offer([b"g"], 1)  # three items: the item bound
    assert q.depth_bytes == 900 and q.qsize() == 3
    q.get_nowait()
    q.put_nowait([b"h" * 7])  # a plain put is accounted as well (its size from the frames)
    assert q.depth_bytes == 507


def test_a_blocked_bolt_send_wakes_when_the_gateway_takes_a_flush(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(queues, "SAFETY_WAIT_S", NEVER)
    q = OutQueue(maxsize=1, max_bytes=1 << 20)
    wakes: list[int] = []
    outbox = Outbox(q, QueueBytes(1 << 20), lambda: wakes.append(1))
    outbox.send(_flush(3))  # fills the queue
    sender = threading.Thread(target=outbox.send, args=(_flush(4),))
    sender.start()
    # the sender sleeps on the condition (counted), not in a loop
    deadline = threading.Event()
    for _ in range(500):
        if q.waits:
            break
        deadline.wait(0.01)
    assert q.waits == 1 and sender.is_alive()
    assert tuples_in([q.get_nowait()]) == (3, 1)  # the gateway's take: room for one flush
    sender.join(timeout=10)  # with the safety net out of reach, only the take's notify frees it
    assert not sender.is_alive()
    assert q.waits == 1  # one sleep, one wake-up: no polling in between
    assert tuples_in([q.get_nowait()]) == (4, 1)
    assert outbox.time_blocked_s > 0 and outbox.dropped_tuples == 0


def test_on_room_fires_once_per_arming_on_the_taking_thread() -> None:
    q = OutQueue(maxsize=2, max_bytes=1 << 20)
    rooms: list[str] = []
    q.on_room = lambda: rooms.append(threading.current_thread().name)
    q.offer(_flush(1), 10)
    q.offer(_flush(1), 10)
    q.get_nowait()
    assert rooms == []  # not armed: a take wakes nobody
    q.want_room()
    t = threading.Thread(target=q.get_nowait, name="gateway")
    t.start()
    t.join()
    assert rooms == ["gateway"] and q.room_signals == 1
    q.offer(_flush(1), 10)
    q.get_nowait()
    assert rooms == ["gateway"]  # once per arming


def test_a_send_after_the_drain_deadline_is_dropped_and_counted() -> None:
    now = [10.0]
    q = OutQueue(maxsize=1, max_bytes=1 << 20)
    outbox = Outbox(q, QueueBytes(1 << 20), lambda: None, clock=lambda: now[0])
    outbox.send(_flush(5))
    outbox.begin_drain(2.0)
    now[0] = 12.5  # the deadline passed: the send gives up at once, counted
    outbox.send(_flush(7))
    assert (outbox.dropped_tuples, outbox.dropped_frames) == (7, 1)
    assert q.qsize() == 1


def test_the_wire_ledger_counts_the_frames_the_connection_has_not_written() -> None:
    ledger = WireLedger()
    conn = object()
    f1, f2 = _flush(2, 84), _flush(3, 84)  # 6 + 12 + 84 = 102 bytes + a 16-byte tag: 118 on the wire
    ledger.note((conn, 1000, 0), f1)  # f1 occupies [1000, 1118)
    # 50 bytes of the gateway's own messages, then f2 [1168, 1286); nothing written since f1's send
    ledger.note((conn, 1118 + 50, 168), f2)
    assert ledger.unwritten((conn, 1286 + 30, 30)) == (0, 0)  # only a later message of 30 bytes unwritten
    assert ledger.unwritten((conn, 1286, 1)) == (3, 1)  # the last byte of f2: f2 is cut, lost
    assert ledger.unwritten((conn, 1286, 200)) == (5, 2)  # both
    assert ledger.unwritten((object(), 1286, 200)) == (0, 0)  # another connection: not this stop's loss
    ledger.note((conn, 1286, 0), _flush(1, 84))  # everything before 1286 is written: forgotten
    assert ledger.unwritten((conn, 1404, 1404)) == (1, 1)


# --- the spout loop: wake-ups, not a 1 ms poll -------------------------------------------------

class IdleSpout(Spout):
    """Emits a given number of tuples, then nothing."""

    outputs = ["n"]

    def initialize(self, config: dict[str, Any], context: Any) -> None:
        self.left = int(config.get("burst", 0))
        self.calls = 0

    def next_tuple(self) -> None:
        self.calls += 1
        if self.left > 0:
            self.left -= 1
            self.emit([self.calls])


class Sink(Bolt):
    outputs: list[str] = []

    def process(self, tup: Any) -> None:
        pass


class WaitingSpout(Spout):
    """Waits 10 ms for a source of its own in every next_tuple, which never has a record;
    says it waited (``heron_waited``) when the config asks it to, as the Kafka spout does."""

    outputs = ["n"]

    def initialize(self, config: dict[str, Any], context: Any) -> None:
        self.says = bool(config.get("says_waited"))
        self.calls = 0
        self.source = threading.Event()

    def next_tuple(self) -> None:
        self.calls += 1
        self.source.wait(0.01)
        self.heron_waited = self.says


def _plan(burst: int, spout: type[Spout] = IdleSpout, **conf: Any) -> PhysicalPlan:
    b = TopologyBuilder("wake")
    s = b.add_spout("spout", spout, par=1, config={"burst": burst, **conf})
    b.add_bolt("sink", Sink, par=1, inputs={s: Grouping.SHUFFLE})
    b.set_config({"heron_py.instance.batch.size": 1})  # one frame per tuple: a full queue soon
    topo = b.build()
    return PhysicalPlan(topo, round_robin(topo, 1), (StmgrLocation(0, "h", 1, 2),), TopologyState.RUNNING, 1)


class _Task:
    """A task's execution thread (the spout's, or ``component``'s) with real queues, host and
    loop; the test plays the gateway."""

    def __init__(self, plan: PhysicalPlan, out_batches: int, component: str = "spout") -> None:
        self.inbound: queue.Queue[InItem] = queue.Queue(maxsize=64)
        self.out = OutQueue(out_batches, 1 << 20)
        self.outbox = Outbox(self.out, QueueBytes(1 << 20), lambda: None)
        in_bytes = QueueBytes(1 << 20)
        task = plan.packing.tasks_of(component)[0]
        self.runner = TaskRunner(task_id=task, component=component, package_dir=Path("."), inbound=self.inbound,
                                 in_bytes=in_bytes, outbox=self.outbox,
                                 reports=TaskReports(task, component, self.inbound, in_bytes, self.outbox),
                                 mark_ready=lambda: None, log=logging.getLogger("test-wake"))
        self.inbound.put((InKind.PPLAN, json.dumps(plan.to_dict()).encode()))
        self.thread = threading.Thread(target=self.runner.run, name="execution")

    def spout(self) -> IdleSpout:
        host = self.runner.reports.host
        assert host is not None
        user: IdleSpout = host.user
        return user

    def wait_for(self, cond: Any, what: str) -> None:
        ev = threading.Event()
        for _ in range(1000):
            if cond():
                return
            ev.wait(0.01)
        raise AssertionError(f"timed out waiting for {what}")


def test_an_idle_spout_loop_sleeps_on_its_queue_instead_of_polling(stand_in_main: None) -> None:
    task = _Task(_plan(burst=0), out_batches=64)
    task.thread.start()
    task.wait_for(lambda: task.runner.reports.host is not None, "the host")
    ev = threading.Event()
    w0, c0 = task.runner.wakeups, task.spout().calls
    ev.wait(1.0)  # one second of an idle spout
    w1, c1 = task.runner.wakeups, task.spout().calls
    task.runner.stop()
    task.thread.join(timeout=10)
    assert not task.thread.is_alive()
    # the old loop slept 1 ms per empty next_tuple: ~1000 wake-ups a second; now the wait
    # doubles to IDLE_WAIT_MAX_S (50 ms) and timers: ~20 plus a few
    assert 1 <= w1 - w0 <= 40, w1 - w0
    assert 1 <= c1 - c0 <= 40, c1 - c0  # one next_tuple per wake-up once idle (was 64 per 1 ms)


@pytest.mark.parametrize("says_waited", [True, False])
def test_a_spout_that_waits_on_its_own_source_gets_no_idle_wait_of_the_loop(stand_in_main: None,
                                                                            says_waited: bool) -> None:
    task = _Task(_plan(burst=0, spout=WaitingSpout, says_waited=says_waited), out_batches=64)
    task.thread.start()
    task.wait_for(lambda: task.runner.reports.host is not None and task.spout().calls > 0, "the first next_tuple")
    ev = threading.Event()
    w0, c0 = task.runner.wakeups, task.spout().calls
    ev.wait(0.5)
    w1, c1 = task.runner.wakeups, task.spout().calls
    task.runner.stop()
    task.thread.join(timeout=10)
    assert not task.thread.is_alive()
    assert c1 > c0
    if says_waited:
        # the loop goes straight back to next_tuple: it never sleeps on its queue (a timer
        # due would still be served by the non-blocking drain at the top of each round)
        assert w1 == w0
    else:  # a spout that does not say so still gets the loop's progressive wait
        assert w1 - w0 >= 1


def test_a_spout_held_by_backpressure_wakes_when_the_gateway_takes(stand_in_main: None,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    # timers and the stop check out of reach: only the gateway's ROOM can wake the loop
    for name in ("STOP_CHECK_S", "USER_METRICS_S", "EXPIRE_S"):
        monkeypatch.setattr(execution, name, NEVER)
    task = _Task(_plan(burst=500), out_batches=2)
    task.thread.start()
    task.wait_for(lambda: task.outbox.held, "held frames (the outbound queue full)")
    ev = threading.Event()
    ev.wait(0.2)
    calls, wakeups = task.spout().calls, task.runner.wakeups
    # the rounds of next_tuple (64 calls each) until the queue was full: a round whose time budget
    # (the flush interval) ran out on a loaded machine ends early and its flush leaves room, so
    # the queue of 2 flushes may take a second round (65 calls seen in CI); then none while held
    assert task.out.qsize() == 2 and 1 <= calls <= 2 * 64, calls
    ev.wait(0.3)
    assert (task.spout().calls, task.runner.wakeups) == (calls, wakeups)  # asleep: not one wake-up
    taken = 0
    for _ in range(1000):  # play the gateway: take what comes, until the burst went out
        try:
            flush = task.out.get(timeout=10)
        except queue.Empty:
            break
        taken += tuples_in([flush])[0]
        if taken == 500:
            break
    assert taken == 500 and task.out.room_signals >= 1
    task.wait_for(lambda: task.spout().calls > 500, "next_tuple again after the burst")
    # stop: the stop check is out of reach, so a plan item wakes the loop to see the flag
    task.runner.stop()
    task.inbound.put((InKind.WAKE, None))
    task.thread.join(timeout=10)
    assert not task.thread.is_alive()


def test_a_frame_counts_its_tuples_and_other_frames_none() -> None:
    ack = encode_batch_frame(1, 2, b"r" * 17, msg_type=MsgType.ACK_BATCH, count=1)
    assert tuples_in([[*_flush(9), ack, encode_frame(MsgType.INSTANCE_READY, b"")]]) == (9, 3)


class Seen(Bolt):
    """Records the first value of every tuple it processes, in order."""

    outputs: list[str] = []
    values: list[Any] = []

    def process(self, tup: Any) -> None:
        Seen.values.append(tup.values[0])


def test_a_batch_that_comes_before_the_plan_is_processed_after_it_in_order(stand_in_main: None) -> None:
    from heron_py.common.serialization import dumps_body

    b = TopologyBuilder("early")
    s = b.add_spout("spout", IdleSpout, par=1)
    b.add_bolt("seen", Seen, par=1, inputs={s: Grouping.SHUFFLE})
    topo = b.build()
    plan = PhysicalPlan(topo, round_robin(topo, 1), (StmgrLocation(0, "h", 1, 2),), TopologyState.RUNNING, 1)
    spout_task, task = plan.packing.tasks_of("spout")[0], plan.packing.tasks_of("seen")[0]
    inbound: queue.Queue[InItem] = queue.Queue(maxsize=64)
    in_bytes = QueueBytes(1 << 20)
    outbox = Outbox(OutQueue(64, 1 << 20), QueueBytes(1 << 20), lambda: None)
    runner = TaskRunner(task_id=task, component="seen", package_dir=Path("."), inbound=inbound, in_bytes=in_bytes,
                        outbox=outbox, reports=TaskReports(task, "seen", inbound, in_bytes, outbox),
                        mark_ready=lambda: None, log=logging.getLogger("test-early"))

    def deliver(*values: int) -> None:  # as the gateway does
        frame = encode_batch_frame(task, spout_task, dumps_body(None, [[v] for v in values], None),
                                   MsgType.TUPLE_BATCH, len(values))
        in_bytes.put += len(frame)
        inbound.put((InKind.BATCH, frame))

    Seen.values = []
    deliver(1, 2)  # before the plan (a misordered sender): kept for after it
    inbound.put((InKind.PPLAN, json.dumps(plan.to_dict()).encode()))
    deliver(3)
    thread = threading.Thread(target=runner.run, name="execution")
    thread.start()
    try:
        ev = threading.Event()
        for _ in range(500):
            if len(Seen.values) >= 3:
                break
            ev.wait(0.01)
    finally:
        runner.stop()
        thread.join(timeout=10)
    assert Seen.values == [1, 2, 3]
    assert in_bytes.put == in_bytes.taken  # every batch counted out once


def test_a_restore_drops_the_old_runs_queued_batches_and_markers_and_keeps_every_other_item() -> None:
    """Effectively once: a slow bolt's queued backlog is the old run's, which the restore rolls
    back; it is dropped when the restore arrives, overflow included, so the restore is the next
    thing the execution thread sees after what is not data (the new plan first)."""
    from instance.queues import Inbox

    inbound: queue.Queue[InItem] = queue.Queue(maxsize=3)
    in_bytes = QueueBytes(1 << 20)
    paused: list[bool] = []
    box = Inbox(inbound, in_bytes, pause=lambda: paused.append(True), resume=lambda: paused.append(False),
                call_later=lambda delay, fn: None)
    batch = encode_batch_frame(2, 1, b"x" * 50, count=3)
    box.deliver((InKind.BATCH, batch))
    box.deliver((InKind.PPLAN, b"{}"))
    box.deliver((InKind.MARKER, b"m"))
    box.deliver((InKind.BATCH, batch))  # the queue is full: overflow, reading paused
    box.deliver((InKind.COMMITTED, 7))
    assert paused == [True] and len(box.overflow) == 2 and in_bytes.depth == len(batch)
    dropped = box.restore((InKind.RESTORE, (9, 8)))
    assert dropped == 3
    assert in_bytes.depth == 0  # the dropped batch's bytes are no longer counted as queued
    box.retry()  # the overflow's rest moves in behind what was kept
    assert paused[-1] is False
    got = [inbound.get_nowait() for _ in range(inbound.qsize())]
    assert got == [(InKind.PPLAN, b"{}"), (InKind.COMMITTED, 7), (InKind.RESTORE, (9, 8))]
