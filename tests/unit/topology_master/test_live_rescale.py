"""A live rescale's protocol on the master (rescale.py), the plan book's part in it, and the
stream manager's drain answer (stream_manager/drain.py): pure, with a hand-moved clock."""

import asyncio
from dataclasses import dataclass

from heron_py.common.framing import MsgType
from heron_py.common.wire import decode, encode_msg
from heron_py.planner.model import TopologyState
from heron_py.planner.packing import repack
from proto import heron_py_pb2 as pb
from stream_manager.drain import Drainer
from tests.fakes import plan_book, spout_bolt_topology, stmgr_location
from topology_master.rescale import LiveRescale, Phase, Step


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def grown(par: int = 5):
    book = plan_book()  # s:1 (task 1), b:3 (tasks 2-4) over 2 containers
    topo = spout_bolt_topology(bolt_par=par)
    return book, topo, repack(book.packing, topo)


def test_it_drains_once_every_added_task_is_connected_then_switches_when_every_container_drained() -> None:
    book, topo, packing = grown()
    clock = Clock()
    live = LiveRescale(clock)
    assert not live.busy and live.target is None  # a master's: nothing under way
    assert live.begin(book.packing, topo, packing, 30.0) is None
    assert live.phase is Phase.STAGING and live.target is not None
    assert (live.target.topology, live.target.added, live.target.removed) == (topo, {5, 6}, set())
    assert live.on_instances({1, 2, 3, 4, 5}) is None  # task 6 not connected yet
    assert live.on_instances({1, 2, 3, 4, 5, 6}) is Step.DRAIN
    assert live.phase is Phase.DRAINING and live.drain_id == 1
    assert live.on_instances({1, 2, 3, 4, 5, 6}) is None  # draining already: no second drain
    assert live.on_drained(0, 1) is None
    assert live.on_drained(0, 1) is None  # the same container twice is one
    assert live.on_drained(1, 0) is None  # an earlier drain's answer
    assert live.on_drained(1, 1) is Step.SWITCH
    target = live.finish()
    assert target.packing == packing and not live.busy and live.note == ""
    # the next rescale's drain has an id of its own: a late answer to this one does not count for it
    assert live.begin(packing, spout_bolt_topology(bolt_par=2), repack(packing, spout_bolt_topology(bolt_par=2)),
                      30.0) is None
    assert live.on_instances(set()) is Step.DRAIN and live.drain_id == 2
    assert live.on_drained(0, 1) is None and live.on_drained(1, 1) is None


def test_a_second_rescale_and_a_change_of_containers_are_refused_in_one_line() -> None:
    book, topo, packing = grown()
    live = LiveRescale(Clock())
    assert live.begin(book.packing, topo, packing, 30.0) is None
    assert live.begin(book.packing, topo, packing, 30.0) == (
        "a rescale is already under way (staging); wait for it to finish")
    other = LiveRescale(Clock())
    bigger = repack(plan_book(containers=1).packing, topo)
    assert other.begin(book.packing, topo, bigger, 30.0) == (
        "a live rescale keeps the topology's 2 containers; the stored packing has 1")


def test_the_waits_are_bounded_a_task_that_never_connects_and_a_drain_that_never_ends() -> None:
    book, topo, packing = grown()
    clock = Clock()
    live = LiveRescale(clock, stage_wait_s=10.0)
    live.begin(book.packing, topo, packing, 3.0)
    clock.now += 9.9
    assert live.tick() is None
    clock.now += 0.1
    assert live.tick() is Step.DRAIN
    assert live.note == "added tasks not connected after 10 s; switching without them"
    live.on_drained(1, live.drain_id)
    clock.now += 2.9
    assert live.tick() is None
    clock.now += 0.1
    assert live.tick() is Step.SWITCH
    assert live.note == ("stream managers [0] not drained after 3 s; switching: keys still in flight may reach "
                         "their old task, and what is lost is replayed")
    assert live.tick() is None  # over: nothing more happens


def test_a_shrink_has_nothing_to_wait_for_and_drains_at_once() -> None:
    book = plan_book()
    topo = spout_bolt_topology(bolt_par=2)
    live = LiveRescale(Clock())
    live.begin(book.packing, topo, repack(book.packing, topo), 30.0)
    assert live.target is not None and live.target.removed == {4}
    assert live.on_instances(set()) is Step.DRAIN


def test_the_book_counts_staged_tasks_and_forgets_removed_ones_at_the_switch() -> None:
    @dataclass
    class Info:
        task_id: int
        pid: int
        ready: bool

    book, topo, packing = grown(par=2)  # task 4 removed
    book.register(stmgr_location(0))
    book.register(stmgr_location(1))
    book.update_instances(0, [Info(1, 11, True), Info(3, 13, True), Info(9, 19, True)])
    assert 9 not in book.instances  # neither in the packing nor staged: not ours
    book.staged = frozenset({9})
    book.update_instances(0, [Info(1, 11, True), Info(3, 13, True), Info(9, 19, False)])
    assert {t for t, i in book.instances.items() if i.get("pid")} >= {1, 3, 9}
    book.switch(topo, packing)
    assert set(book.instances) == {1, 2, 3}
    assert book.instances[3] == {"component": "b", "container": 0, "pid": 13, "ready": True}
    plan = book.next_plan(TopologyState.PAUSED)
    assert plan.state is TopologyState.PAUSED and book.run_state is TopologyState.RUNNING
    assert plan.packing == packing


class Trees:
    def __init__(self) -> None:
        self.pending = 0


def test_a_stream_manager_answers_a_drain_once_no_tree_was_open_for_the_quiet_time() -> None:
    clock = Clock()
    trees = Trees()
    sent: list[bytes] = []
    tasks: list = []

    async def sleep(s: float) -> None:
        clock.now += s
        # a spout's last batch opens trees after a first empty moment; they close at 100.04
        trees.pending = 2 if 100.02 <= clock.now < 100.04 - 1e-9 else 0

    drainer = Drainer(3, trees, sent.append, tasks.append, clock=clock, sleep=sleep)
    drainer.on_request(None, pb.DrainRequest(drain_id=7, quiet_ms=50))  # type: ignore[arg-type]
    asyncio.run(tasks[0])
    assert len(sent) == 1
    msg = decode(MsgType.DRAINED, sent[0])
    assert isinstance(msg, pb.Drained) and (msg.container, msg.drain_id, msg.pending) == (3, 7, 0)
    # the quiet time began again when the trees closed at 100.04: answered after 100.09, not at 100.05
    assert 100.09 - 1e-6 <= clock.now < 100.095


def test_a_newer_drain_request_ends_the_older_wait() -> None:
    clock = Clock()
    trees = Trees()
    trees.pending = 1
    sent: list[bytes] = []
    tasks: list = []
    drainer = Drainer(0, trees, sent.append, tasks.append, clock=clock)

    async def both() -> None:
        drainer.on_request(None, pb.DrainRequest(drain_id=1, quiet_ms=0))  # type: ignore[arg-type]
        first = asyncio.ensure_future(tasks[0])
        await asyncio.sleep(0.01)
        drainer.on_request(None, pb.DrainRequest(drain_id=2, quiet_ms=0))  # type: ignore[arg-type]
        await asyncio.wait_for(first, 1.0)  # ends without answering
        assert sent == []
        trees.pending = 0
        await asyncio.wait_for(tasks[1], 1.0)

    asyncio.run(both())
    assert len(sent) == 1


def test_a_stream_manager_takes_a_task_its_plan_does_not_have_yet_and_refuses_one_placed_elsewhere(tmp_path) -> None:
    """A live rescale's new task connects before the plan that adds it (its id was never used);
    a task the plan runs in another container is refused in one line."""
    import json
    import logging

    from heron_py.common.handshake import PeerIdentity
    from heron_py.state.localfs import LocalFsStateManager
    from stream_manager.main import StreamManager
    from stream_manager.servers import Inbound
    from tests.fakes import FakeConn, word_count_plan

    sm = StreamManager(topology="wc", container=0, secret=b"s" * 32, state=LocalFsStateManager(tmp_path / "state"),
                       port_file=tmp_path / "stmgr.port", log=logging.getLogger("stmgr[0]"))
    sm.clique.set_plan = lambda plan: None  # type: ignore[method-assign]  # no peer connections here
    sm.on_new_pplan(json.dumps(word_count_plan().to_dict()).encode())  # container 0: tasks 1 and 3
    inbound = Inbound(sm)
    new, elsewhere = FakeConn(PeerIdentity("instance", "6")), FakeConn(PeerIdentity("instance", "4"))
    inbound.instances.register(new, pb.RegisterInstanceRequest(task_id=6, component="count", pid=16))
    assert new.is_open and sm.instances.get(6) is new
    assert [i.task_id for i in sm.instances.infos()] == [6]  # reported to the master, which staged it
    inbound.instances.register(elsewhere, pb.RegisterInstanceRequest(task_id=4, component="count", pid=14))
    assert elsewhere.closed == "refused registration: task 4 does not run in container 0"


def test_a_drain_request_from_the_master_starts_the_wait() -> None:
    from heron_py.common.handshake import PeerIdentity
    from heron_py.common.net import Route

    clock, trees = Clock(), Trees()
    sent: list[bytes] = []
    tasks: list = []
    drainer = Drainer(2, trees, sent.append, tasks.append, clock=clock)
    routes = drainer.routes()
    assert [(r.role, r.msg_type) for r in routes] == [("tmanager", MsgType.DRAIN_REQUEST)]
    route: Route = routes[0]
    from tests.fakes import FakeConn

    master = FakeConn(PeerIdentity("tmanager", ""))
    route.fn(master, encode_msg(pb.DrainRequest(drain_id=4, quiet_ms=0)))  # as the connection calls it
    assert drainer.latest == 4 and len(tasks) == 1
    asyncio.run(tasks[0])
    msg = decode(MsgType.DRAINED, sent[0])
    assert isinstance(msg, pb.Drained) and (msg.container, msg.drain_id) == (2, 4)
