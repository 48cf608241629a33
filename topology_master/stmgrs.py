"""The topology master's links to the stream managers: it answers their registrations,
follows their heartbeats and losses, and pushes every new physical plan to all of them.
The decisions are PlanBook's (plan_book.py); this class only talks to connections."""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable, Mapping

from google.protobuf.json_format import MessageToDict

from heron_py.common.net import NO_CONTAINER, Connection
from heron_py.common.wire import encode_msg
from heron_py.planner.model import PhysicalPlan, StmgrLocation, TopologyState
from proto import heron_py_pb2 as pb
from topology_master.plan_book import PlanBook

# how long a new topology's first plan waits, once every stream manager registered, for the
# instances that have not registered yet (a task that cannot start must not hold the rest back)
FIRST_PLAN_WAIT_S = 5.0


class StmgrLinks:
    def __init__(self, book: PlanBook, *, is_active: Callable[[], bool], store_plan: Callable[[PhysicalPlan], None],
                 state_changed: Callable[[], None], log: logging.Logger,
                 clock: Callable[[], float] = time.monotonic, first_plan_wait_s: float = FIRST_PLAN_WAIT_S) -> None:
        self.book = book
        # A new topology's first plan goes out once every instance has registered with its
        # stream manager, as Heron's stream manager registers with the master only once all its
        # instances connected: every task gets its plan, and its spouts start, at about the same
        # time, not as each container happens to come up (``PlanBook.new_topology``: a master
        # that took over a stored plan pushes at once).
        self.first_plan_wait_s = first_plan_wait_s
        self._complete_since: float | None = None  # when the held first plan began to wait
        self.conns: dict[int, Connection] = {}  # container -> its registered SM's connection
        # container -> when its stream manager last registered or heartbeated: a connection that
        # stays open to a frozen process proves nothing, its heartbeats' age does
        self.heard: dict[int, float] = {}
        self._clock = clock
        self._is_active = is_active
        self._store_plan = store_plan
        self._state_changed = state_changed  # the execution state is due for a write
        self._log = log

    def register(self, conn: Connection, req: pb.RegisterStmgrRequest) -> None:
        error = self.book.registration_error(req.container, self._is_active(), os.getpid())
        if error is not None:
            conn.send_msg(pb.RegisterStmgrResponse(ok=False, error=error))
            conn.close(f"registration refused: {error}")
            return
        old = self.conns.get(req.container)
        if old is not None and old is not conn:
            old.close(f"stream manager {req.container} registered again on another connection")
        self.book.register(StmgrLocation(req.container, req.host, req.port, req.pid))
        self.conns[req.container] = conn
        self.heard[req.container] = self._clock()
        conn.container = req.container
        conn.send_msg(pb.RegisterStmgrResponse(ok=True))
        self._log.info("stream manager %d registered (%s:%d pid %d)", req.container, req.host, req.port, req.pid)
        self.book.update_instances(req.container, req.instances)
        self._state_changed()
        if self._plan_due():
            self.push_plan()

    def lost(self, conn: Connection) -> None:
        c = conn.container
        # only the connection the container registered on counts: an old one closing after
        # a re-registration must not unregister the new one
        if c != NO_CONTAINER and self.conns.get(c) is conn:
            del self.conns[c]
            self.book.lost(c)
            self._log.warning("stream manager %d disconnected", c)
            self._state_changed()

    def heartbeat(self, conn: Connection, hb: pb.StmgrHeartbeat) -> None:
        if self.conns.get(hb.container) is conn:  # only the registered connection speaks for it
            self.heard[hb.container] = self._clock()
        if hb.HasField("metrics"):
            self.book.stmgr_metrics[hb.container] = MessageToDict(hb.metrics, preserving_proto_field_name=True)
        self.book.update_instances(hb.container, hb.instances)
        self._state_changed()
        if self.book.pplan is None and self._plan_due():  # a first plan held for the instances
            self.push_plan()

    def _plan_due(self) -> bool:
        """Whether a plan goes out now: every stream manager is registered and, for a new
        topology's first plan, every instance too, or the wait is over (stream managers
        heartbeat every second, and at once when an instance registers before they have a plan,
        so this is asked often enough)."""
        book = self.book
        if not book.complete:
            return False
        missing = book.missing_instances() if book.new_topology else []
        if not missing:
            return True
        now = self._clock()
        if self._complete_since is None:
            self._complete_since = now
            self._log.info("every stream manager registered; holding the first physical plan until every "
                           "instance has (at most %g s)", self.first_plan_wait_s)
        if now - self._complete_since < self.first_plan_wait_s:
            return False
        self._log.warning("instance tasks %s not registered after %g s; pushing the first physical plan without "
                          "them", missing, self.first_plan_wait_s)
        return True

    def push_plan(self, pause: bool = False) -> None:
        """The next plan to every stream manager, and stored. ``pause``: a live rescale's drain
        plan, which deactivates the spouts and is not stored, so that a master taking over keeps
        the run state the topology is set to (rescale.py)."""
        plan = self.book.next_plan(TopologyState.PAUSED if pause else None)
        if not pause:
            self._store_plan(plan)
        raw = json.dumps(plan.to_dict()).encode()
        frame = encode_msg(pb.NewPhysicalPlan(pplan_json=raw))
        for conn in self.conns.values():
            conn.send(frame)
        self._log.info("pushed physical plan v%d (%s) to %d stream managers", plan.version, plan.state.value,
                       len(self.conns))
        self._state_changed()

    def last_heard(self) -> Mapping[int, float]:
        """When each container's stream manager last registered or heartbeated (the relauncher's)."""
        return self.heard

    def send_all(self, frame: bytes) -> None:
        """A command for every registered stream manager (effectively once's)."""
        for conn in self.conns.values():
            conn.send(frame)

    def close_all(self, reason: str) -> None:
        for conn in self.conns.values():
            conn.close(reason)
