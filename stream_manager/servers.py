"""The two sides of the stream manager's port, as Heron's ``InstanceServer`` and ``StMgrServer``.

One port (and the container's Unix socket) serves both the local instances and the other stream
managers of the clique; the handshake proves which a connection is, and the connection then
takes its role's server (``net.ByRole``) and its role's routes (``Routes``): from then on each
side sees only its own connections, with typed handlers for what its role may send (a message a
role may not send is refused by the connection itself, counted as ``__bad-frames/role``) and its
own lifecycle (close, writing paused). A message that names a task or a container is taken only
from its owner (``owners.Owners``). The decisions that touch several parts stay the
``StreamManager``'s (``stream_manager/main.py``).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from heron_py.common.framing import MsgType, batch_src, frame_type
from heron_py.common.net import NO_TASK, BaseHandler, ByRole, Connection, Route, Routes, on, on_raw, relay
from heron_py.common.wire import decode_as
from proto import heron_py_pb2 as pb
from stream_manager.backpressure import ConnKey
from stream_manager.forwarder import DropReason
from stream_manager.owners import Owners

if TYPE_CHECKING:  # an annotation only: main imports this module
    from stream_manager.main import StreamManager


class InstanceServer(BaseHandler):
    """The local instances' connections: registration, their batches and acks (only their
    registered task's own: ``Connection.task``, set by ``LocalInstances.add``), their reports,
    and their writing paused (a slow instance is backpressure) and close (a loss)."""

    def __init__(self, sm: StreamManager, owners: Owners) -> None:
        self.sm = sm
        self.owners = owners

    def routes(self) -> list[Route]:
        sm, own = self.sm, self.owners
        return [
            # the hot path: raw frames, routed on their header (never decoded here)
            on_raw("instance", MsgType.TUPLE_BATCH, self.instance_batch),
            on_raw("instance", MsgType.CKPT_MARKER, self.instance_marker),
            on_raw("instance", MsgType.ACK_BATCH, self.instance_acks),
            on("instance", pb.RegisterInstanceRequest, self.register),
            own.on_task(pb.InstanceMetrics, lambda conn, m: sm.instances.metrics.__setitem__(m.task_id, m)),
            own.on_task(pb.InstanceReady, self.instance_ready),
            relay("instance", pb.CheckpointSaved, self.checkpoint_saved),
            own.on_task(pb.StateRestored, sm.ckpt.on_state_restored),
        ]

    def instance_batch(self, conn: Connection, frame: bytes) -> None:
        """A tuple batch or marker of a local instance: only its registered task's own (a batch's
        source is never NO_TASK, so an unregistered connection's are refused)."""
        sm = self.sm
        if batch_src(frame) != conn.task:
            self.refuse_batch(conn, frame_type(frame), frame)
        elif sm.ckpt.restore_id and not sm.ckpt.admits(conn):
            sm.forwarder.drop(DropReason.OLD_RUN, frame)  # the run a restore rolled back
        else:
            sm.forwarder.route(frame)
            if sm.instances.buckets:  # topology.component.output.bps: only a limited task pays
                self.meter(conn.task, len(frame))

    def instance_marker(self, conn: Connection, frame: bytes) -> None:
        """A checkpoint marker stops here while a loss we reported is unresolved."""
        if self.sm.ckpt.losses.admits_marker():
            self.instance_batch(conn, frame)

    def meter(self, task: int, nbytes: int) -> None:
        instances = self.sm.instances
        wait = instances.meter(task, nbytes)
        if wait > 0.0:
            asyncio.get_running_loop().call_later(wait, instances.rate_wait_over, task)

    def instance_acks(self, conn: Connection, frame: bytes) -> None:
        if batch_src(frame) != conn.task:
            self.refuse_batch(conn, MsgType.ACK_BATCH, frame)
        else:
            self.sm.forwarder.route(frame)  # acks pass the fence: they only resolve roots

    def refuse_batch(self, conn: Connection, msg_type: int, frame: bytes) -> None:
        """A batch from a connection that may not send it (a task sends only its own)."""
        self.owners.refuse(conn, msg_type, f"with source task {batch_src(frame)}", "refused batch")

    def instance_ready(self, conn: Connection, msg: pb.InstanceReady) -> None:
        self.sm.instances.ready[msg.task_id] = msg.pid
        self.sm.master.heartbeat(with_metrics=False)  # the master learns it now

    def checkpoint_saved(self, conn: Connection, frame: bytes) -> None:
        """An instance's report, relayed to the master as it came once it is its own task's."""
        msg = decode_as(pb.CheckpointSaved, MsgType.CHECKPOINT_SAVED, frame, conn.peer_name)
        if self.owners.task(conn, MsgType.CHECKPOINT_SAVED, msg.task_id):
            self.sm.ckpt.to_master(frame)

    def register(self, conn: Connection, req: pb.RegisterInstanceRequest) -> None:
        sm, ident = self.sm, conn.identity
        assert ident is not None
        # a task the plan places in another container is refused; one the plan does not have yet
        # is a live rescale's, started before the plan that adds it (its ids are never reused)
        routing = sm.forwarder.routing
        elsewhere = sm.pplan is not None and routing.container_for(req.task_id) not in (None, sm.container)
        if str(req.task_id) != ident.peer_id or elsewhere:
            error = f"task {req.task_id} does not run in container {sm.container}"
            conn.send_msg(pb.RegisterInstanceResponse(ok=False, error=error))
            conn.close(f"refused registration: {error}")
            return
        sm.register_instance(conn, req)

    def on_writing(self, conn: Connection, paused: bool) -> None:
        if conn.task != NO_TASK:
            self.sm.on_writing(ConnKey.task(conn.task), paused)

    def on_close(self, conn: Connection) -> None:
        self.sm.ckpt.on_closed(conn)
        self.sm.instance_lost(conn)


class StmgrServer(BaseHandler):
    """The other stream managers' connections to this one (ours to them are the clique's):
    their batches and acks, their hello, backpressure and restore fence (only for the container
    their handshake proved), and their close (a loss; a peer's backpressure ends with it)."""

    def __init__(self, sm: StreamManager, owners: Owners) -> None:
        self.sm = sm
        self.owners = owners
        self.peers_in: dict[int, Connection] = {}  # each peer's newest inbound connection

    def routes(self) -> list[Route]:
        sm, own, fwd = self.sm, self.owners, self.sm.forwarder
        return [
            on_raw("stmgr", MsgType.TUPLE_BATCH, self.peer_batch),
            on_raw("stmgr", MsgType.CKPT_MARKER, self.peer_marker),
            on_raw("stmgr", MsgType.ACK_BATCH, lambda conn, frame: fwd.route(frame)),
            own.on_container(pb.RestoreFence, sm.ckpt.on_peer_fence),
            own.on_container(pb.StmgrHello, self.peer_hello),
            own.on_container(pb.BackPressure, lambda conn, m: sm.on_peer_backpressure(m)),
        ]

    def peer_batch(self, conn: Connection, frame: bytes) -> None:
        sm = self.sm
        if sm.ckpt.restore_id and not sm.ckpt.admits(conn):
            sm.forwarder.drop(DropReason.OLD_RUN, frame)
        else:
            sm.forwarder.route(frame)

    def peer_marker(self, conn: Connection, frame: bytes) -> None:
        if self.sm.ckpt.losses.admits_marker():
            self.peer_batch(conn, frame)

    def peer_hello(self, conn: Connection, msg: pb.StmgrHello) -> None:
        """A peer's new connection. Another one from the same peer still open is half-open (the
        peer lost it without a FIN: a host that vanished, a reset we never saw): what was in
        flight on it is lost, and it is closed now rather than when its silence is noticed."""
        old = self.peers_in.get(msg.container)
        self.peers_in[msg.container] = conn
        if old is not None and old is not conn and old.is_open:
            self.sm.data_lost(f"a second connection from stream manager {msg.container} while its first was open")
            old.close("the peer opened a new connection: this one is half-open")

    def on_close(self, conn: Connection) -> None:
        sm, ident = self.sm, conn.identity
        sm.ckpt.on_closed(conn)
        for peer, c in list(self.peers_in.items()):
            if c is conn:
                del self.peers_in[peer]
        peer_id = ident.peer_id if ident is not None else ""
        sm.data_lost(f"the connection from stream manager {peer_id} closed")
        # a peer that dies while in backpressure must not leave us paused
        try:
            container = int(peer_id)
        except ValueError:
            return
        if container in sm.bp.peers:
            sm.apply(sm.bp.peer_stop(container))


class Inbound:
    """The port's two servers, built once at start: ``handler`` gives each accepted connection
    its role's server, ``routes()`` each role's table. A role with no server here (any other
    daemon that proves the secret) gets no-op handlers and an empty table: whatever it sends is
    refused."""

    def __init__(self, sm: StreamManager) -> None:
        owners = Owners(sm.counters, sm.refuse_log)
        self.instances = InstanceServer(sm, owners)
        self.peers = StmgrServer(sm, owners)
        self.handler = ByRole({"instance": self.instances, "stmgr": self.peers})

    def routes(self) -> Routes:
        return Routes("stmgr", [*self.instances.routes(), *self.peers.routes()])
