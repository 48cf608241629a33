"""The instance's two metric reports, built on the gateway thread from counters the execution
thread writes (each counter has one writer; a report may straddle a batch, never corrupt it):

- ``message()``: the protobuf ``InstanceMetrics`` sent to the stream manager every second
  (it reaches the topology master's status);
- ``report()``: the JSON report for the metrics manager (metrics_manager/store.py documents it).
"""

from __future__ import annotations

import json
import logging
import queue
import time
import uuid
from typing import Any

from heron_py.common.process import process_gauges
from heron_py.runtime.host import BoltHost, ComponentHost, ExecCounters
from heron_py.runtime.stateful import StatefulTask
from instance.queues import Outbox, QueueBytes
from proto import heron_py_pb2 as pb


class TaskReports:
    def __init__(self, task_id: int, component: str, inbound: queue.Queue[Any], in_bytes: QueueBytes,
                 outbox: Outbox) -> None:
        self.task_id = task_id
        self.component = component
        self._in = inbound
        self._in_bytes = in_bytes
        self._outbox = outbox
        self.host: ComponentHost | None = None  # set by the execution thread once it exists
        # a spout host keeps no execution counters of its own: its loop's busy time goes here
        self.spout_counters = ExecCounters()
        self.stateful: StatefulTask | None = None  # effectively once: the task's checkpoint side
        self.exceptions: list[dict[str, Any]] = []  # the last 20 tracebacks of user code
        self.skipped_user_metrics: set[str] = set()  # not JSON-serializable: reported once, then left out
        self._log = logging.getLogger(f"{component}-{task_id}.metrics")

    def record_exception(self, trace: str) -> None:
        self.exceptions.append({"id": uuid.uuid4().hex, "trace": trace, "time": time.time()})
        del self.exceptions[:-20]  # the last 20 are enough to show

    def exec_counters(self) -> ExecCounters:
        """The counters the task's execution loop writes and the reports read: a bolt host's
        own, else (a spout) this task's."""
        host = self.host
        return host.counters if isinstance(host, BoltHost) else self.spout_counters

    def message(self) -> pb.InstanceMetrics:
        host = self.host
        m = host.metrics if host is not None else None
        c = self.exec_counters()
        out = self._outbox
        return pb.InstanceMetrics(
            task_id=self.task_id, emitted=host.emitter.emitted if host else 0, processed=c.processed,
            acked=m.acked if m else 0, failed=m.failed if m else 0, timed_out=m.timed_out if m else 0,
            in_queue_batches=self._in.qsize(), in_queue_bytes=self._in_bytes.depth,
            out_queue_batches=out.qsize(), out_queue_bytes=out.bytes.depth,
            time_blocked_ms=int(out.time_blocked_s * 1000),
            complete_latency_p50_ms=(m.percentile(0.5) if m else None) or 0.0,
            complete_latency_p99_ms=(m.percentile(0.99) if m else None) or 0.0,
            execute_latency_ms=c.take_latency_ms())

    def report(self) -> dict[str, Any]:
        host = self.host
        counters: dict[str, float] = {}
        gauges: dict[str, float] = {
            "__in-queue-batches": self._in.qsize(), "__out-queue-batches": self._outbox.qsize(),
            "__in-queue-bytes": self._in_bytes.depth, "__out-queue-bytes": self._outbox.bytes.depth}
        # what a stop could not send to the stream manager within its drain time (the last
        # report carries it; instance/main.py shutdown_drain)
        counters["__dropped-tuples/shutdown"] = self._outbox.dropped_tuples
        doc: dict[str, Any] = {"kind": "instance", "task": self.task_id, "component": self.component,
                               "time": time.time(), "counters": counters, "gauges": gauges,
                               "process": process_gauges(), "user": {},
                               "exceptions": list(self.exceptions)}
        if host is None:
            return doc
        em = host.emitter
        others = dict(em.emitted_by_stream)
        counters["__emit-count/default"] = em.emitted - sum(others.values())
        for stream, n in others.items():
            counters[f"__emit-count/{stream}"] = n
        if em.storm_arity is not None:  # a Storm component's emits of more values than declared
            for stream, n in dict(em.storm_arity.mismatches).items():
                counters[f"__emit-arity-mismatch/{stream}"] = n
        c = self.exec_counters()
        for key, n in list(c.executed.items()):
            counters[f"__execute-count/{key}"] = n
        m = host.metrics
        counters["__ack-count"] = m.acked
        counters["__fail-count"] = m.failed + m.timed_out
        counters["__time-blocked-ms"] = int(self._outbox.time_blocked_s * 1000)
        counters["__busy-time-ms"] = int(c.busy_now(self._outbox.time_blocked_s) * 1000)
        gauges["__execute-latency-ms"] = (c.exec_total_s / c.processed * 1000.0) if c.processed else 0.0
        if isinstance(host, BoltHost):  # mean since the start, as the execute latency
            gauges["__process-latency-ms"] = m.process_ms_total / m.process_samples if m.process_samples else 0.0
        p50, p99 = m.percentile(0.5), m.percentile(0.99)
        if p50 is not None:
            gauges["__complete-latency-ms/p50"] = p50
            gauges["__complete-latency-ms/p99"] = p99 or 0.0
        doc["user"] = self._user_metrics(dict(host.user_metrics))
        rt = self.stateful
        if rt is not None:
            counters["__checkpoint-aborted"] = rt.aborted
            if rt.last_saved is not None:
                cid, size, took = rt.last_saved
                gauges["__checkpoint-id"] = cid
                gauges["__checkpoint-size-bytes"] = size
                gauges["__checkpoint-save-ms"] = took * 1000.0
        if self.skipped_user_metrics:
            gauges["__user-metrics-skipped"] = len(self.skipped_user_metrics)
        return doc

    def _user_metrics(self, values: dict[str, Any]) -> dict[str, Any]:
        """The user's metric values that JSON can carry. One value that it cannot (an object,
        a dict with tuple keys) would fail the whole report, and with it every later report of
        this task; so it is left out, and said once per metric name."""
        out: dict[str, Any] = {}
        for name, value in values.items():
            try:
                json.dumps(value)
            except (TypeError, ValueError) as e:
                if name not in self.skipped_user_metrics:
                    self.skipped_user_metrics.add(name)
                    self._log.warning("user metric %r of task %d: expected a number, or a dict of numbers "
                                      "with string keys (JSON), found %s (%s); the metric is left out of "
                                      "reports", name, self.task_id, type(value).__name__, e)
                continue
            out[name] = value
        return out
