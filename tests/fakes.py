"""The tests' one set of fakes: a manual clock, a connection that records what is sent, the
plan and topology builders the unit tests share, the master as its HTTP API reads it, and small
picklable components.

Components live at module level so pickling finds them (the planner stores them by reference).
Everything here is pure: no sockets, no threads, no real time."""

from __future__ import annotations

import collections
import logging
import random
from collections.abc import Callable, Iterable
from typing import Any

from google.protobuf.message import Message

from heron_py.api.bolt.bolt import Bolt
from heron_py.api.spout.spout import Spout
from heron_py.api.stream import Stream
from heron_py.api.streamlet.generator import Generator
from heron_py.common.framing import MsgType, batch_dest, frame_type
from heron_py.common.handshake import PeerIdentity
from heron_py.planner.model import (
    ComponentDef,
    ComponentKind,
    GroupingDef,
    GroupingKind,
    InputDef,
    PackingPlan,
    PhysicalPlan,
    PickledRef,
    StmgrLocation,
    StreamDef,
    TaskPlacement,
    TopologyDef,
    TopologyState,
)
from heron_py.planner.packing import round_robin
from heron_py.runtime.host import HostOptions, SpoutHost, make_host
from heron_py.testing import ManualClock as ManualClock  # users' clock: t, clock(), now, advance, sleep
from stream_manager.acking import AckService
from topology_master.http_api import MetricsView
from topology_master.plan_book import PlanBook

# --- connections -----------------------------------------------------------------------------


class FakeConn:
    """A daemon connection (heron_py.common.net's Connection) that records every frame sent,
    in order; ``writing_paused`` is what the forwarder reads for backpressure."""

    def __init__(self, identity: PeerIdentity | None = None) -> None:
        self.identity = identity
        self.peer_name = f"{identity.role} {identity.peer_id}" if identity else "fake"
        self.task = -1  # net.NO_TASK: what the stream manager's instance server sets on registration
        self.container = -1  # net.NO_CONTAINER
        self.transport = None  # no socket: nothing to set options on
        self.writing_paused = False
        self.max_frame = 16 * 1024 * 1024
        self.sent: list[bytes] = []
        self.send_many_calls = 0
        self.reading = True

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True

    def close(self, reason: str = "") -> None:
        self.closed = reason

    @property
    def is_open(self) -> bool:
        return not hasattr(self, "closed")

    def send(self, frame: bytes) -> None:
        self.sent.append(frame)

    def send_many(self, frames: Iterable[bytes]) -> None:
        self.send_many_calls += 1
        self.sent.extend(frames)

    def send_msg(self, msg: Message) -> None:
        self.sent.append(msg.SerializeToString())  # the body: tests parse it as the class they expect

    def set_write_limits(self, high: int, low: int) -> None:
        pass

    def hold_output(self, share: int) -> None:
        self.held_share = share  # nothing is ever held: every send is recorded at once

    def drop_held(self, is_dropped: Callable[[bytes], bool]) -> list[bytes]:
        return []

    def set_max_frame(self, n: int) -> None:
        self.max_frame = n


class FakeDestinations:
    """Where the stream manager's forwarder sends: its instances by task, its peers by
    container; a missing key is a destination that is down."""

    def __init__(self) -> None:
        self.instances: dict[int, FakeConn] = {}
        self.peers: dict[int, FakeConn] = {}

    def instance(self, task: int) -> FakeConn | None:
        return self.instances.get(task)

    def peer(self, container: int) -> FakeConn | None:
        return self.peers.get(container)


# --- plans -----------------------------------------------------------------------------------


def component(name: str, kind: ComponentKind, par: int, inputs: Iterable[InputDef] = (),
              outputs: Iterable[StreamDef] = (), class_name: str | None = None) -> ComponentDef:
    """A component of a plan that is never run: its class reference is empty."""
    return ComponentDef(name, kind, PickledRef(b""), class_name or f"m:{name}", par, tuple(inputs), tuple(outputs))


def grouped(source: str, stream: str, kind: GroupingKind, fields: Iterable[str] = ()) -> InputDef:
    return InputDef(source, stream, GroupingDef(kind, tuple(fields)))


def stmgr_location(container: int, port: int = 7000) -> StmgrLocation:
    """Container ``container``'s stream manager on 127.0.0.1, port ``port + container``."""
    return StmgrLocation(container, "127.0.0.1", port + container, 100 + container)


def spout_bolt_topology(spout_par: int = 1, bolt_par: int = 3, name: str = "t") -> TopologyDef:
    """Spout "s" and bolt "b", unconnected: what the master's rules need of a topology."""
    return TopologyDef(name, (component("s", ComponentKind.SPOUT, spout_par, class_name="m:S"),
                              component("b", ComponentKind.BOLT, bolt_par, class_name="m:B")))


def numbers_topology() -> TopologyDef:
    """Spout "numbers" (1 task, stream default ("n",)) into bolt "sink" (2 tasks, fields on n)."""
    spout = component("numbers", ComponentKind.SPOUT, 1, outputs=(StreamDef("default", ("n",)),),
                      class_name="m:Numbers")
    by_n = grouped("numbers", "default", GroupingKind.FIELDS, ("n",))
    sink = component("sink", ComponentKind.BOLT, 2, inputs=(by_n,), class_name="m:Sink")
    return TopologyDef("t", (spout, sink))


def word_count_plan() -> PhysicalPlan:
    """Spout "words" (tasks 1, 2), bolt "count" (tasks 3, 4, 5) over containers 0 and 1:
    container 0 holds tasks 1 and 3, container 1 holds 2, 4 and 5."""
    topo = TopologyDef("wc", (component("words", ComponentKind.SPOUT, 2), component("count", ComponentKind.BOLT, 3)))
    tasks = (TaskPlacement(1, "words", 0, 0), TaskPlacement(2, "words", 1, 1), TaskPlacement(3, "count", 0, 0),
             TaskPlacement(4, "count", 1, 1), TaskPlacement(5, "count", 2, 1))
    return PhysicalPlan(topo, PackingPlan(2, tasks),
                        (StmgrLocation(0, "h", 1, 10), StmgrLocation(1, "h", 2, 11)), TopologyState.RUNNING, 1)


def physical_plan(topo: TopologyDef, containers: int = 1, version: int = 1) -> PhysicalPlan:
    """``topo`` packed round robin, running, with a stream manager per container on localhost."""
    stmgrs = tuple(StmgrLocation(c, "localhost", 0, 0) for c in range(containers))
    return PhysicalPlan(topo, round_robin(topo, containers), stmgrs, TopologyState.RUNNING, version)


# --- components (module level: picklable) ----------------------------------------------------


class WordSpout(Spout):
    outputs = ["word"]

    def initialize(self, config: dict[str, Any], context: Any) -> None:
        self.words = list(config.get("words", "a b c d e f g h").split())
        self.i = 0

    def next_tuple(self) -> None:
        if self.i < len(self.words):
            self.emit([self.words[self.i]])
            self.i += 1


class Splitter(Bolt):
    outputs = ["word"]

    def process(self, tup: Any) -> None:
        for w in tup.values[0].split():
            self.emit([w])


class Counter(Bolt):
    outputs = ["word", "count"]

    def initialize(self, config: dict[str, Any], context: Any) -> None:
        self.counts: dict[Any, int] = {}

    def process(self, tup: Any) -> None:
        self.counts[tup.values[0]] = self.counts.get(tup.values[0], 0) + 1


class TwoStreams(Spout):
    outputs = [Stream(["n"], name="evens"), Stream(["n", "label"], name="odds")]


def plan_book(containers: int = 2) -> PlanBook:
    """The master's plan book for ``spout_bolt_topology()`` packed over ``containers``."""
    topo = spout_bolt_topology()
    return PlanBook("t", topo, round_robin(topo, containers))


# --- the topology master ---------------------------------------------------------------------

API_NOW = 1_700_000_000.0  # FakeApiMaster's clock


class FakeApiMaster:
    """The topology master as its HTTP API (topology_master/http_api.py ``Api``) reads it, and
    nothing else: topology "t" (``numbers_topology()`` over 2 containers), its status, and
    its metrics on a clock stopped at ``API_NOW``. (The admin commands' view of the master,
    ``MasterControl``, has its own fake in tests/unit/topology_master/test_admin.py.)"""

    def __init__(self) -> None:
        self.topology = "t"
        self._topo = numbers_topology()
        self._packing = round_robin(self._topo, 2)
        self.metrics = MetricsView(clock=lambda: API_NOW)

    def status(self) -> dict[str, Any]:
        return {"topology": "t", "state": "RUNNING", "pplan_version": 3, "tmanager": {"pid": 1},
                "stmgrs": {"0": {"port": 1}}, "instances": {"1": {"ready": True}}}


# --- in-process pipelines ------------------------------------------------------------------


class Items(Generator):
    """A Streamlet source that emits its items once, then nothing (so an in-process run ends)."""

    def __init__(self, items: Any) -> None:
        self.items = list(items)

    def setup(self, context: Any) -> None:
        self.left = list(self.items)

    def get(self) -> Any:
        return self.left.pop(0) if self.left else None


class HostPipeline:
    """Every task's host of a physical plan, in this process: TUPLE_BATCH frames go to their
    task, ACK_BATCH frames to the stream manager's real acker (AckService) and its results to
    the spout, as the stream managers route them. ``spout`` names the component ``pump`` calls
    next_tuple on."""

    def __init__(self, plan: PhysicalPlan, spout: str) -> None:
        self.plan = plan
        self.spout = spout
        self.frames: collections.deque[bytes] = collections.deque()
        self.hosts: dict[int, Any] = {t.task_id: make_host(plan, t.task_id, self.frames.extend,
                                                     HostOptions(rng=random.Random(1)))
                      for t in plan.packing.tasks}
        for h in self.hosts.values():
            h.initialize()
            if isinstance(h, SpoutHost):
                h.start()
        self.acker = AckService(lambda task, frame: self.hosts[task].on_results(frame), logging.getLogger("test"))

    def users(self, component: str) -> list[Any]:
        return [self.hosts[t].user for t in self.plan.packing.tasks_of(component)]

    def host(self, component: str) -> Any:
        [t] = self.plan.packing.tasks_of(component)
        return self.hosts[t]

    def pump(self, spout_calls: int = 0) -> None:
        """``spout_calls`` next_tuple calls on each spout task, then every frame delivered until
        none is left."""
        for t in self.plan.packing.tasks_of(self.spout):
            self.hosts[t].next_tuples(spout_calls)
        while True:
            for h in self.hosts.values():
                h.flush()
            if not self.frames:
                return
            while self.frames:
                f = self.frames.popleft()
                if frame_type(f) == MsgType.TUPLE_BATCH:
                    self.hosts[batch_dest(f)].process_frame(f)
                elif frame_type(f) == MsgType.ACK_BATCH:
                    self.acker.on_ack_batch(f)

    def tick(self, component: str) -> None:
        for t in self.plan.packing.tasks_of(component):
            self.hosts[t].tick()
        self.pump()
