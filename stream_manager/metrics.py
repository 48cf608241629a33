"""The stream manager's metrics in its two formats: the JSON report for the container's
metrics manager (names documented in metrics_manager/store.py) and the protobuf
``StmgrMetrics`` that rides on each heartbeat to the topology master.

Reads the other parts' counters and never changes them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from heron_py.common.net import Connection, Counters
from heron_py.common.process import process_gauges
from proto import heron_py_pb2 as pb
from stream_manager.acking import AckService
from stream_manager.backpressure import BackpressureState, ConnKey, ConnKind, describe
from stream_manager.clique import Clique
from stream_manager.forwarder import Forwarder
from stream_manager.instances import LocalInstances


class StreamManagerMetrics:
    def __init__(self, *, container: int, bp: BackpressureState, forwarder: Forwarder, acks: AckService,
                 instances: LocalInstances, clique: Clique, counters: Counters, spouts_held: Callable[[], bool],
                 wall_clock: Callable[[], float] = time.time,
                 process: Callable[[], Mapping[str, float]] = process_gauges) -> None:
        self.container = container
        self._bp = bp
        self._fwd = forwarder
        self._acks = acks
        self._instances = instances
        self._clique = clique
        self._counters = counters
        self._spouts_held = spouts_held
        self._wall_clock = wall_clock
        self._process = process

    def connections(self) -> dict[ConnKey, Connection]:
        """Instances first, then peers: the order the report always listed them in."""
        return {**{ConnKey.task(t): c for t, c in self._instances.conns.items()},
                **{ConnKey.stmgr(p): c for p, c in self._clique.peers.items()}}

    def bp_by_component(self) -> dict[str, int]:
        """Milliseconds above the high mark per cause: a task's time under its component's
        name (Heron's __time_spent_back_pressure_by_compid), a peer's under "stmgr N"."""
        comp = self._fwd.routing.component_of
        out: dict[str, int] = {}
        for key, secs in self._bp.time_by_cause().items():
            name = comp.get(key.ident, str(key)) if key.kind is ConnKind.TASK else str(key)
            out[name] = out.get(name, 0) + int(secs * 1000)
        return out

    def report(self) -> dict[str, Any]:
        """The JSON report for the metrics manager (metrics_manager/store.py)."""
        bp = self._bp
        counters: dict[str, float] = {
            "__time_spent_back_pressure_ms": int(bp.time_in_backpressure() * 1000)}
        # connections refused before authentication (shed at the caps, past the deadline)
        counters["__connections-shed"] = self._counters.shed
        counters["__handshake-timeouts"] = self._counters.handshake_timeouts
        # frames refused after authentication: a wrong tag, a batch from the wrong role or task, a
        # message type the sender's role may not send;
        # and peers aborted for silence (frozen, or gone with their host)
        counters["__bad-frames/auth"] = self._counters.bad_frame_auth
        counters["__bad-frames/source"] = self._counters.bad_frame_source
        counters["__bad-frames/role"] = self._counters.bad_frame_role  # a message its role may not send (net.Routes)
        counters["__silent-peers"] = self._counters.silent_peers
        for reason, n in self._fwd.drops.items():  # every reason, zeros too: a drop is never silent
            counters[f"__dropped-tuples/{reason.value}"] = n
        conns = self.connections()
        for key, c in conns.items():
            counters[f"__bytes-out/{key}"] = c.bytes_out
            counters[f"__bytes-in/{key}"] = c.bytes_in
        for key, n in self._fwd.tuples_out.items():
            counters[f"__tuples-out/{key}"] = n
        for comp, ms in self.bp_by_component().items():
            counters[f"__time_spent_back_pressure_by_compid/{comp}"] = ms
        for task, n in self._instances.rate_pauses.items():  # topology.component.output.bps at work
            counters[f"__rate-limit-pauses/{ConnKey.task(task)}"] = n
        gauges: dict[str, float] = {"__in-backpressure": int(bp.local),
                                    "__spouts-paused": int(self._spouts_held()),
                                    "__pending-roots": self._acks.pending}
        for key, c in conns.items():
            gauges[f"__buffered-bytes/{key}"] = c.write_buffer_size()
        # frames held for destinations not connected yet, and before the first plan: with the
        # connections' buffers, all the tuples this process holds (docs/guides/backpressure.md)
        gauges["__held-bytes"] = self._fwd.held_total_bytes + self._fwd.unplanned_bytes
        return {"kind": "stmgr", "container": self.container, "time": self._wall_clock(), "counters": counters,
                "gauges": gauges, "process": self._process()}

    def for_master(self) -> pb.StmgrMetrics:
        bp = self._bp
        buffered = {str(key): c.write_buffer_size() for key, c in self.connections().items()}
        # our own slow connections if any, else the peers whose backpressure we follow
        cause = describe(bp.slow) or ", ".join(f"stmgr {c}" for c in sorted(bp.peers))
        inst = self._instances.metrics
        return pb.StmgrMetrics(
            in_backpressure=bp.local, spouts_paused=self._spouts_held(),
            time_spent_back_pressure_ms=int(bp.time_in_backpressure() * 1000),
            backpressure_episodes=bp.episodes, backpressure_cause=cause,
            dropped_tuples=self._fwd.dropped_tuples, buffered_bytes=buffered,
            instances=[inst[t] for t in sorted(inst)],
            pending_roots=self._acks.pending, auth_failures=self._counters.auth_failures,
            bad_frames=self._counters.bad_frames, time_spent_back_pressure_by_compid_ms=self.bp_by_component())
