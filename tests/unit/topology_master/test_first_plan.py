"""A new topology's first physical plan waits for every instance to register with its stream
manager (as Heron's stream manager registers with the master only once all its instances have),
at most FIRST_PLAN_WAIT_S; a master that took over a running topology pushes at once."""

from __future__ import annotations

import logging
from typing import Any

from google.protobuf.message import Message

from heron_py.common.framing import MsgType, frame_type
from heron_py.common.wire import TYPES
from heron_py.testing.harness import ManualClock
from proto import heron_py_pb2 as pb
from tests.fakes import plan_book
from topology_master.stmgrs import StmgrLinks


class Conn:
    """A registered stream manager's connection: what the master sent it."""

    def __init__(self) -> None:
        self.sent: list[Any] = []
        self.container = -1  # net.NO_CONTAINER until registered

    def send_msg(self, msg: Message) -> None:
        self.sent.append(TYPES[type(msg)])

    def send(self, frame: bytes) -> None:
        self.sent.append(frame_type(frame))

    def close(self, reason: str) -> None:
        self.sent.append(("closed", reason))

    def plans(self) -> int:
        return self.sent.count(MsgType.NEW_PHYSICAL_PLAN)


def _links(clock: ManualClock, took_over: bool = False) -> tuple[StmgrLinks, list[Any]]:
    book = plan_book()
    if took_over:  # the plan an earlier master stored, as TopologyMaster adopts it
        book.adopt(plan_book().next_plan(), epoch=2)
    stored: list[Any] = []
    links = StmgrLinks(book, is_active=lambda: True, store_plan=stored.append, state_changed=lambda: None,
                       log=logging.getLogger("test"), clock=clock, first_plan_wait_s=5.0)
    return links, stored


def _infos(links: StmgrLinks, container: int, registered: bool = True) -> list[pb.InstanceInfo]:
    tasks = links.book.packing.tasks_in(container) if registered else []
    return [pb.InstanceInfo(task_id=t.task_id, pid=1000 + t.task_id, ready=False) for t in tasks]


def _register(links: StmgrLinks, conn: Conn, container: int, registered: bool = True) -> None:
    links.register(conn, pb.RegisterStmgrRequest(container=container, host="127.0.0.1", port=9000 + container,
                                                 pid=10 + container, instances=_infos(links, container, registered)))


def test_the_first_plan_waits_for_every_instance_then_goes_to_every_stream_manager() -> None:
    clock = ManualClock(100.0)
    links, stored = _links(clock)
    c0, c1 = Conn(), Conn()
    _register(links, c0, 0)
    _register(links, c1, 1, registered=False)  # its instances not connected yet
    assert (c0.plans(), c1.plans(), stored) == (0, 0, [])
    clock.advance(1.0)
    links.heartbeat(c1, pb.StmgrHeartbeat(container=1, instances=_infos(links, 1)[:1]))  # one of them
    assert (c0.plans(), c1.plans()) == (0, 0)
    links.heartbeat(c1, pb.StmgrHeartbeat(container=1, instances=_infos(links, 1)))  # all of them
    assert (c0.plans(), c1.plans(), len(stored)) == (1, 1, 1)
    # later heartbeats and a re-registration do as before: no plan, and a plan to the new link
    links.heartbeat(c0, pb.StmgrHeartbeat(container=0, instances=_infos(links, 0)))
    assert (c0.plans(), c1.plans()) == (1, 1)
    c1b = Conn()
    _register(links, c1b, 1, registered=False)
    assert (c0.plans(), c1b.plans()) == (2, 1)


def test_an_instance_that_never_registers_holds_the_first_plan_for_the_wait_only() -> None:
    clock = ManualClock(100.0)
    links, stored = _links(clock)
    c0, c1 = Conn(), Conn()
    _register(links, c0, 0)
    _register(links, c1, 1, registered=False)
    clock.advance(4.9)
    links.heartbeat(c1, pb.StmgrHeartbeat(container=1))
    assert (c0.plans(), c1.plans()) == (0, 0)
    clock.advance(0.2)  # 5.1 s since every stream manager was there
    links.heartbeat(c1, pb.StmgrHeartbeat(container=1))
    assert (c0.plans(), c1.plans(), len(stored)) == (1, 1, 1)


def test_a_master_that_took_over_pushes_at_once() -> None:
    links, stored = _links(ManualClock(100.0), took_over=True)
    c0, c1 = Conn(), Conn()
    _register(links, c0, 0, registered=False)
    _register(links, c1, 1, registered=False)
    assert (c0.plans(), c1.plans(), len(stored)) == (1, 1, 1)
