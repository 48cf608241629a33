"""The local instances' connections, keyed by task id, and what the master is told about them."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from heron_py.common.net import Connection
from proto import heron_py_pb2 as pb


class LocalInstances:
    def __init__(self, log: logging.Logger) -> None:
        self.conns: dict[int, Connection] = {}
        self.ready: dict[int, int] = {}  # task id -> pid, instances that finished initialize
        self.pids: dict[int, int] = {}
        self.metrics: dict[int, pb.InstanceMetrics] = {}  # latest of each, for the master's heartbeat
        self._log = log

    def get(self, task: int) -> Connection | None:
        return self.conns.get(task)

    def add(self, conn: Connection, task: int, pid: int) -> None:
        """A (re)registered instance; an older connection for the same task is closed."""
        old = self.conns.get(task)
        if old is not None and old is not conn:
            old.close(f"task {task} registered again on a new connection")
        self.conns[task] = conn
        self.pids[task] = pid
        self.ready.pop(task, None)
        conn.context = task

    def remove(self, conn: Connection) -> int | None:
        """The task whose current connection ``conn`` was, or None (an old or unregistered one)."""
        task = conn.context
        if isinstance(task, int) and self.conns.get(task) is conn:
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
            conn = self.conns.get(t)
            if conn is not None:
                conn.pause_reading() if paused else conn.resume_reading()

    def broadcast(self, frame: bytes) -> None:
        for conn in self.conns.values():
            conn.send(frame)

    def set_write_limits(self, high: int, low: int) -> None:
        for conn in self.conns.values():
            conn.set_write_limits(high, low)

    def close(self, reason: str) -> None:
        for conn in self.conns.values():
            conn.close(reason)
