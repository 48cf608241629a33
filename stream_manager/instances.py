"""The local instances' connections, keyed by task id, whether each is read (backpressure holds
spouts, the output rate limit holds a task over its rate), and what the master is told about them."""

from __future__ import annotations

import logging
import socket
from collections.abc import Callable, Iterable, Mapping

from heron_py.common.net import NO_TASK, Connection
from proto import heron_py_pb2 as pb
from stream_manager.ratelimit import TokenBucket

# Effectively once: the bytes of an instance's input in its connection's transport (and past
# it, in the socket, which the instance reads only as its task takes input); the rest of what
# waits for it is held back in the connection, where a restore drops the old run's batches. A
# restore then waits behind this much of a slow task's input, not the high watermark's 16 MB.
INSTANCE_SHARE = 256 << 10
# ... and of the socket's send buffer, the rest of what is out of reach (a Unix socket's default
# is about 200 KB of a slow task's input; the kernel doubles this for its bookkeeping)
INSTANCE_SOCKET_BUFFER = 32 << 10


class LocalInstances:
    def __init__(self, log: logging.Logger, clock: Callable[[], float]) -> None:
        self.conns: dict[int, Connection] = {}
        self.ready: dict[int, int] = {}  # task id -> pid, instances that finished initialize
        self.pids: dict[int, int] = {}
        self.metrics: dict[int, pb.InstanceMetrics] = {}  # latest of each, for the master's heartbeat
        self._log = log
        self._clock = clock  # the output rate limits' (loop.call_later takes their waits as delays)
        # a task is read unless either holds it: one must not resume what the other paused
        self._held: set[int] = set()  # spouts paused by backpressure
        self._over_rate: set[int] = set()  # tasks waiting out their output rate's debt
        self.buckets: dict[int, TokenBucket] = {}  # tasks with an output rate limit
        self.rate_pauses: dict[int, int] = {}  # times each task's reading stopped for its rate
        self._held_share = 0  # with hold_output: each connection's transport share

    def hold_output(self, share: int) -> None:
        """Every instance connection, now and later, holds back what passes ``share`` bytes
        in its transport (``Connection.hold_output``): effectively once, where a restore drops it."""
        self._held_share = share
        for conn in self.conns.values():
            _hold(conn, share)

    def get(self, task: int) -> Connection | None:
        return self.conns.get(task)

    def add(self, conn: Connection, task: int, pid: int) -> bool:
        """A (re)registered instance; an older connection for the same task is closed. True
        when there was one: what was in flight on it is lost (its close reports nothing, the
        task's connection being the new one by then)."""
        old = self.conns.get(task)
        replaced = old is not None and old is not conn
        if old is not None and old is not conn:
            old.close(f"task {task} registered again on a new connection")
        self.conns[task] = conn
        self.pids[task] = pid
        if self._held_share:
            _hold(conn, self._held_share)
        self.ready.pop(task, None)
        conn.task = task
        if task in self._over_rate:  # a new connection of a task still waiting out its rate
            conn.pause_reading()
        return replaced

    def remove(self, conn: Connection) -> int | None:
        """The task whose current connection ``conn`` was, or None (an old or unregistered one)."""
        task = conn.task
        if task != NO_TASK and self.conns.get(task) is conn:
            del self.conns[task]
            self.ready.pop(task, None)
            return task
        return None

    def infos(self) -> list[pb.InstanceInfo]:
        return [pb.InstanceInfo(task_id=t, pid=self.pids.get(t, 0), ready=t in self.ready)
                for t in sorted(self.conns)]

    def set_reading(self, tasks: Iterable[int], paused: bool) -> None:
        """Stops (or resumes) reading from these tasks' connections: how spouts are paused."""
        for t in tasks:
            if paused:
                self._held.add(t)
            else:
                self._held.discard(t)
            self._apply_reading(t)

    def _apply_reading(self, task: int) -> None:
        conn = self.conns.get(task)
        if conn is not None:
            conn.pause_reading() if task in self._held or task in self._over_rate else conn.resume_reading()

    def set_rates(self, rates: Mapping[int, float]) -> None:
        """The plan's output rates (bytes per second per task): a task whose rate is unchanged
        keeps its bucket; one no longer limited is read again."""
        for task in list(self.buckets):
            if rates.get(task) != self.buckets[task].rate:
                del self.buckets[task]
                if task in self._over_rate:
                    self._over_rate.discard(task)
                    self._apply_reading(task)
        now = self._clock()
        for task, rate in rates.items():
            if task not in self.buckets:
                self.buckets[task] = TokenBucket.full(rate, now)

    def meter(self, task: int, nbytes: int) -> float:
        """Counts a batch ``task`` sent against its output rate; when that puts it in debt, stops
        reading it and returns the seconds until ``rate_wait_over`` should resume it (else 0)."""
        bucket = self.buckets.get(task)
        if bucket is None:
            return 0.0
        wait = bucket.take(nbytes, self._clock())
        if wait <= 0.0 or task in self._over_rate:
            return 0.0  # under its rate, or already waiting (what was buffered adds to the debt)
        self._over_rate.add(task)
        self.rate_pauses[task] = self.rate_pauses.get(task, 0) + 1
        self._apply_reading(task)
        return wait

    def rate_wait_over(self, task: int) -> None:
        """The wait ``meter`` asked for is over: the task is read again unless backpressure holds it."""
        if task in self._over_rate:
            self._over_rate.discard(task)
            self._apply_reading(task)

    def broadcast(self, frame: bytes) -> None:
        for conn in self.conns.values():
            conn.send(frame)

    def set_write_limits(self, high: int, low: int) -> None:
        for conn in self.conns.values():
            conn.set_write_limits(high, low)

    def close(self, reason: str) -> None:
        for conn in self.conns.values():
            conn.close(reason)


def _hold(conn: Connection, share: int) -> None:
    conn.hold_output(share)
    sock = conn.transport.get_extra_info("socket") if conn.transport is not None else None
    if sock is not None:  # the kernel doubles it for its bookkeeping
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, INSTANCE_SOCKET_BUFFER)
