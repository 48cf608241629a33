"""Who may speak for which task or container on the stream manager's port.

The handshake proves a peer's role and id, and an instance then registers as its task. A
message that names a task (an instance's metrics, readiness, saved checkpoint, restore) is
taken only on the connection registered as that task; one that names a container (a peer's
backpressure, restore fence, hello) only on the connection whose handshake proved that
container. Anything else, like a batch whose source is another task, is refused: counted
(``__bad-frames/source``), logged at a bounded rate, and the connection closed; nothing in it
is acted on.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from heron_py.common.framing import MsgType
from heron_py.common.guard import RateLimitedLog
from heron_py.common.net import NO_TASK, Connection, Counters, Route, on
from heron_py.common.wire import TYPES
from proto import heron_py_pb2 as pb

# the messages that name a task (an instance's) and those that name a container (a peer's)
T = TypeVar("T", pb.InstanceMetrics, pb.InstanceReady, pb.StateRestored)
C = TypeVar("C", pb.RestoreFence, pb.StmgrHello, pb.BackPressure)


class Owners:
    def __init__(self, counters: Counters, log: RateLimitedLog) -> None:
        self._counters = counters
        self._log = log

    def refuse(self, conn: Connection, msg_type: int, claim: str, kind: str = "refused message") -> None:
        """A message from a connection that may not send it (``claim`` says whose it claims to
        be): counted, logged at a bounded rate, and the connection closed."""
        self._counters.bad_frames += 1
        self._counters.bad_frame_source += 1
        ident = conn.identity
        who = f"{ident.role} {ident.peer_id}" if ident is not None else "an unauthenticated peer"
        if ident is None or ident.role == "instance":
            who += ", " + (f"registered as task {conn.task}" if conn.task != NO_TASK else "not registered")
        self._log.warning("refused a %s from %s (%s) %s; closing the connection", MsgType(msg_type).name,
                          conn.peer_name, who, claim, kind=kind)
        conn.close(f"a {MsgType(msg_type).name} it may not send")

    def task(self, conn: Connection, msg_type: int, task: int) -> bool:
        """Whether an instance's message about ``task`` is its own: the task it registered as."""
        if conn.task != NO_TASK and conn.task == task:
            return True
        self.refuse(conn, msg_type, f"for task {task}")
        return False

    def container(self, conn: Connection, msg_type: int, container: int) -> bool:
        """Whether a stream manager's message about ``container`` is its own: the container its
        handshake proved."""
        ident = conn.identity
        if ident is not None and ident.peer_id == str(container):
            return True
        self.refuse(conn, msg_type, f"for container {container}")
        return False

    def on_task(self, cls: type[T], fn: Callable[[Connection, T], None]) -> Route:
        """The route of an instance's message about a task (``cls`` has ``task_id``): ``fn``
        gets those of the sender's own task; the rest are refused."""
        msg_type = TYPES[cls]

        def checked(conn: Connection, msg: T) -> None:
            if self.task(conn, msg_type, msg.task_id):
                fn(conn, msg)
        return on("instance", cls, checked)

    def on_container(self, cls: type[C], fn: Callable[[Connection, C], None]) -> Route:
        """The route of a peer stream manager's message about a container (``cls`` has
        ``container``): ``fn`` gets those of the sender's own container; the rest are refused."""
        msg_type = TYPES[cls]

        def checked(conn: Connection, msg: C) -> None:
            if self.container(conn, msg_type, msg.container):
                fn(conn, msg)
        return on("stmgr", cls, checked)
