"""The execution thread: runs the user's spout or bolt, never touches a socket.

It waits for the first physical plan, loads the topology package, instantiates the
component with a delegate (our side of heronpy's ``emit``/``ack``/``fail``/``log``), calls
``initialize`` and then loops: a spout calls ``next_tuple`` while the topology is active
and the outbound queue has room; a bolt takes batches from the inbound queue and calls
``process`` per tuple, ``process_tick`` on the tick interval. Emitted tuples are batched per
destination task and flushed when a batch is full or ``flush_interval_s`` has passed.
"""

from __future__ import annotations

import json
import logging
import queue
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any

from heron_py.api.topology_context import TopologyContext
from heron_py.api.tuple import HeronTuple, TrackedTuple, TupleHelper
from heron_py.common import config as cfgkeys
from heron_py.common.config import InstanceConfig, ReliabilityConfig
from heron_py.common.config_codec import restore_config
from heron_py.common.framing import (
    BATCH_HEADER,
    BODY_OFFSET,
    HEADER_SIZE,
    RESULT_ACKED,
    RESULT_RECORD,
)
from heron_py.common.package import load_main
from heron_py.common.process import process_gauges
from heron_py.common.serialization import loads_batch, loads_user_object
from heron_py.planner.model import ComponentKind, PhysicalPlan, TopologyState
from heron_py.runtime.emitter import Emitter
from heron_py.runtime.reliability import Reliability, TaskMetrics
from instance.gateway import QueueBytes
from proto import heron_py_pb2 as pb


class Delegate:
    """What heronpy's Spout/Bolt call into (``heron_py.api`` ComponentDelegate)."""

    def __init__(self, runner: TaskRunner, logger: logging.Logger) -> None:
        self._runner = runner
        self.logger = logger

    def emit(self, tup: Sequence[Any], stream: str = "default", anchors: Any = None,
             direct_task: int | None = None, need_task_ids: bool = False,
             tup_id: Any = None) -> list[int] | None:
        runner = self._runner
        emitter = runner.emitter
        assert emitter is not None
        rel = runner.reliability
        if rel is None:
            return emitter.emit(tup, stream, direct_task, need_task_ids)
        if runner.is_spout:
            if tup_id is None:
                return emitter.emit(tup, stream, direct_task, need_task_ids)
            root = rel.new_root()
            sent, xor = emitter.emit_root(tup, stream, direct_task, need_task_ids, root)
            rel.emitted(root, tup_id, xor)
            return sent
        if anchors is None:
            anchors = [runner.current] if runner.auto_anchor and runner.current is not None else ()
        elif isinstance(anchors, HeronTuple):
            anchors = [anchors]
        tracked = [a for a in anchors if isinstance(a, TrackedTuple) and a.roots]
        if not tracked:
            return emitter.emit(tup, stream, direct_task, need_task_ids)
        return emitter.emit_anchored(tup, stream, direct_task, need_task_ids, tracked)

    def ack(self, tup: Any) -> None:
        runner = self._runner
        runner.metrics.acked += 1
        if runner.reliability is not None and isinstance(tup, TrackedTuple) and tup.roots:
            assert runner.emitter is not None
            runner.emitter.ack(tup)

    def fail(self, tup: Any) -> None:
        runner = self._runner
        runner.metrics.failed += 1
        if runner.reliability is not None and isinstance(tup, TrackedTuple) and tup.roots:
            assert runner.emitter is not None
            runner.emitter.fail(tup)

    def log(self, message: str, level: int | str | None = None) -> None:
        if isinstance(level, str):
            lvl = logging.getLevelName(level.upper())
            level = lvl if isinstance(lvl, int) else logging.INFO
        self.logger.log(level if level is not None else logging.INFO, message)


def _bind_fast_emit(user: Any, emitter: Emitter, specialize: bool = True) -> None:
    """At most once, an emit needs no delegate: bind heronpy's ``emit`` signature straight to
    the emitter on this instance (one Python call per emit instead of three). Only when the
    user's class keeps the API's own ``emit``."""
    from heron_py.api.bolt.bolt import Bolt
    from heron_py.api.spout.spout import Spout

    em = emitter.emit
    if isinstance(user, Spout) and type(user).emit is Spout.emit:
        def spout_emit(tup: Sequence[Any], tup_id: Any = None, stream: str = "default",
                       direct_task: int | None = None, need_task_ids: bool = False) -> list[int] | None:
            return em(tup, stream, direct_task, need_task_ids)

        user.emit = spout_emit  # type: ignore[method-assign]
    elif isinstance(user, Bolt) and type(user).emit is Bolt.emit:
        fast = emitter.default_stream_emit() if specialize else None
        if fast is not None:
            user.emit = fast  # type: ignore[method-assign]
            return

        def bolt_emit(tup: Sequence[Any], stream: str = "default", anchors: Any = None,
                      direct_task: int | None = None, need_task_ids: bool = False) -> list[int] | None:
            return em(tup, stream, direct_task, need_task_ids)

        user.emit = bolt_emit  # type: ignore[method-assign]


class TaskRunner:
    def __init__(
        self,
        *,
        task_id: int,
        component: str,
        package_dir: Path,
        inbound: queue.Queue[tuple[str, Any]],
        outbound: queue.Queue[list[bytes]],
        wake_gateway: Callable[[], None],
        mark_ready: Callable[[], None],
        log: logging.Logger,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.task_id = task_id
        self.component_name = component
        self._package_dir = package_dir
        self._in = inbound
        self._out = outbound
        self._wake = wake_gateway
        self._mark_ready = mark_ready
        self._log = log
        self._clock = clock
        self.stopping = False
        self.emitter: Emitter | None = None
        self.pplan: PhysicalPlan | None = None
        self.active = False
        self._capture: IO[str] | None = None
        self._task_component: dict[int, str] = {}
        self.reliability: Reliability | None = None
        self.metrics = TaskMetrics()
        self.is_spout = False
        self.current: HeronTuple | None = None  # the input being processed (auto_anchor)
        self.processed = 0
        self.exec_count = 0
        self.exec_s = 0.0
        # for the metrics manager: totals that are never reset, per "source/stream"
        self.exec_total_s = 0.0
        self.executed: dict[str, int] = {}
        self.user_metrics: dict[str, Any] = {}
        self._user_due: dict[str, float] = {}
        self.exceptions: list[dict[str, Any]] = []
        self._source_streams: dict[str, tuple[str, ...]] = {}
        self._exec_key: dict[str, str] = {}
        self._context: Any = None
        self.time_blocked_s = 0.0
        self.in_bytes: QueueBytes | None = None
        self.out_bytes: QueueBytes | None = None  # put: this thread; taken: the gateway
        self._held: list[list[bytes]] = []
        self.auto_anchor = False

    # --- plumbing ---
    def _try_put(self, frames: list[bytes], size: int) -> bool:
        out_bytes = self.out_bytes
        if out_bytes is not None and out_bytes.depth + size > out_bytes.limit and self._out.qsize():
            return False  # over the byte bound (one item always fits, however large)
        try:
            self._out.put_nowait(frames)
        except queue.Full:
            return False
        if out_bytes is not None:
            out_bytes.put += size
        return True

    def _send(self, frames: list[bytes]) -> None:
        if self.is_spout:
            # a spout never blocks inside emit: what does not fit waits here, and the spout
            # loop stops calling next_tuple (but keeps handling deactivate and acks) until
            # it has gone out
            self._held.append(frames)
            self._push_held()
            return
        self._send_blocking(frames)

    def _push_held(self) -> bool:
        """Moves held frames to the outbound queue; True when none is left."""
        held = self._held
        while held:
            if not self._try_put(held[0], sum(len(f) for f in held[0])):
                self._wake()
                return False
            held.pop(0)
        self._wake()
        return True

    def _send_blocking(self, frames: list[bytes]) -> None:
        """A bolt's flush: waits for room (the gateway is behind or the stream manager stopped
        reading us), which is how backpressure reaches a bolt; stays stoppable."""
        size = sum(len(f) for f in frames)
        if not self._try_put(frames, size):
            t0 = self._clock()
            while not self._try_put(frames, size):
                self._wake()
                if self.stopping:
                    return
                time.sleep(0.001)
            self.time_blocked_s += self._clock() - t0
        self._wake()

    def _execute_latency_ms(self) -> float:
        # read-and-reset of two counters written by the execution thread: a report may mix
        # a batch into the next interval, which only shifts it by a second
        n, total = self.exec_count, self.exec_s
        self.exec_count, self.exec_s = 0, 0.0
        return total / n * 1000.0 if n else 0.0

    def metrics_message(self) -> pb.InstanceMetrics:
        """Called on the gateway thread: reads counters only (each has one writer)."""
        m = self.metrics
        p50 = m.percentile(0.5)
        p99 = m.percentile(0.99)
        return pb.InstanceMetrics(
            task_id=self.task_id, emitted=self.emitter.emitted if self.emitter else 0, processed=self.processed,
            acked=m.acked, failed=m.failed, timed_out=m.timed_out, in_queue_batches=self._in.qsize(),
            in_queue_bytes=self.in_bytes.depth if self.in_bytes else 0, out_queue_batches=self._out.qsize(),
            time_blocked_ms=int(self.time_blocked_s * 1000), complete_latency_p50_ms=p50 or 0.0,
            out_queue_bytes=self.out_bytes.depth if self.out_bytes else 0,
            execute_latency_ms=self._execute_latency_ms(),
            complete_latency_p99_ms=p99 or 0.0)

    def metrics_report(self) -> dict[str, Any]:
        """The JSON report for the metrics manager (metrics_manager/store.py); gateway thread,
        reads counters only."""
        em = self.emitter
        counters: dict[str, float] = {}
        if em is not None:
            others = dict(em.emitted_by_stream)
            counters["__emit-count/default"] = em.emitted - sum(others.values())
            for stream, n in others.items():
                counters[f"__emit-count/{stream}"] = n
        for key, n in list(self.executed.items()):
            counters[f"__execute-count/{key}"] = n
        m = self.metrics
        counters["__ack-count"] = m.acked
        counters["__fail-count"] = m.failed + m.timed_out
        counters["__time-blocked-ms"] = int(self.time_blocked_s * 1000)
        processed = self.processed
        gauges: dict[str, float] = {
            "__execute-latency-ms": (self.exec_total_s / processed * 1000.0) if processed else 0.0,
            "__in-queue-batches": self._in.qsize(), "__out-queue-batches": self._out.qsize(),
            "__in-queue-bytes": self.in_bytes.depth if self.in_bytes else 0,
            "__out-queue-bytes": self.out_bytes.depth if self.out_bytes else 0,
        }
        p50, p99 = m.percentile(0.5), m.percentile(0.99)
        if p50 is not None:
            gauges["__complete-latency-ms/p50"] = p50
            gauges["__complete-latency-ms/p99"] = p99 or 0.0
        return {"kind": "instance", "task": self.task_id, "component": self.component_name, "time": time.time(),
                "counters": counters, "gauges": gauges, "process": process_gauges(),
                "user": dict(self.user_metrics), "exceptions": list(self.exceptions)}

    def collect_user_metrics(self, now: float) -> None:
        """Execution thread: reads each registered metric when its time bucket is due."""
        ctx = self._context
        if ctx is None or not ctx.registered_metrics:
            return
        for name, (metric, bucket) in list(ctx.registered_metrics.items()):
            due = self._user_due.get(name)
            if due is None:
                self._user_due[name] = now + bucket
            elif now >= due:
                self._user_due[name] = now + bucket
                try:
                    self.user_metrics[name] = metric.get_value_and_reset()
                except Exception as e:  # a user metric's bug must not kill the task
                    self._log.warning("user metric %s failed: %s", name, e)

    def record_exception(self, trace: str) -> None:
        import uuid

        self.exceptions.append({"id": uuid.uuid4().hex, "trace": trace, "time": time.time()})
        del self.exceptions[:-20]  # the last 20 are enough to show

    def _wait_for_plan(self) -> PhysicalPlan | None:
        while not self.stopping:
            try:
                kind, payload = self._in.get(timeout=0.2)
            except queue.Empty:
                continue
            if kind == "pplan":
                return PhysicalPlan.from_dict(json.loads(payload))
            self._log.warning("dropping %s that arrived before the physical plan", kind)
        return None

    def run(self) -> int:
        plan = self._wait_for_plan()
        if plan is None:
            return 0
        self.pplan = plan
        load_main(self._package_dir)
        topo = plan.topology
        comp = topo.component(self.component_name)
        conf = restore_config({**topo.config, **comp.config})
        icfg = InstanceConfig.from_config({**topo.config, **comp.config})
        self._task_component = {t.task_id: t.component for t in plan.packing.tasks}
        cls = loads_user_object(comp.class_ref.data)
        context = TopologyContext(topo, plan.packing, self.task_id, conf)
        self._context = context
        for i in comp.inputs:
            self._source_streams[i.component] = (*self._source_streams.get(i.component, ()), i.stream)
        self._exec_key = {src: f"{src}/{streams[0]}" for src, streams in self._source_streams.items()
                          if len(streams) == 1}
        self.emitter = Emitter(
            plan, self.task_id, icfg.batch_size, self._send,
            custom_loader=loads_user_object,
            prepare_custom=lambda g, c, s, targets: g.prepare(context, c, s, targets),
        )
        self.is_spout = comp.kind is ComponentKind.SPOUT
        self.reliability = Reliability.from_config(ReliabilityConfig.from_config(conf), clock=self._clock,
                                                   metrics=self.metrics)
        capture_dir = topo.config.get(cfgkeys.CAPTURE_DIR)
        if capture_dir and self.component_name in str(topo.config.get(cfgkeys.CAPTURE_COMPONENTS, "")).split(","):
            path = Path(str(capture_dir)) / f"{self.component_name}-{self.task_id}.jsonl"
            path.parent.mkdir(parents=True, exist_ok=True)
            self._capture = path.open("a", encoding="utf-8")
        delegate = Delegate(self, logging.getLogger(f"{self.component_name}-{self.task_id}"))
        user = cls(delegate)
        self.auto_anchor = bool(getattr(user, "auto_anchor", False))
        if self.reliability is None:
            _bind_fast_emit(user, self.emitter,
                            str(conf.get(cfgkeys.SPECIALIZED_EMIT, "true")).lower() != "false")
        user.initialize(conf, context)
        self._log.info("%s %s task %d initialized", comp.kind.value, self.component_name, self.task_id)
        self._mark_ready()
        try:
            if comp.kind is ComponentKind.SPOUT:
                self._run_spout(user, icfg)
            else:
                self._run_bolt(user, icfg)
        finally:
            if self._capture is not None:
                self._capture.close()
        return 0

    def _on_plan(self, payload: bytes, user: Any, is_spout: bool) -> None:
        plan = PhysicalPlan.from_dict(json.loads(payload))
        if self.pplan is not None and plan.version < self.pplan.version:
            return
        self.pplan = plan
        self._set_active(plan.state is TopologyState.RUNNING, user, is_spout)

    def _set_active(self, active: bool, user: Any, is_spout: bool) -> None:
        if active == self.active:
            return
        self.active = active
        self._log.info("topology %s", "activated" if active else "deactivated")
        if is_spout:
            user.activate() if active else user.deactivate()

    # --- spout ---
    def _run_spout(self, spout: Any, icfg: InstanceConfig) -> None:
        assert self.emitter is not None and self.pplan is not None
        emitter = self.emitter
        clock = self._clock
        interval = icfg.flush_interval_s
        self._set_active(self.pplan.state is TopologyState.RUNNING, spout, True)
        next_tuple = spout.next_tuple
        last_flush = clock()
        rel = self.reliability
        next_check = clock() + 1.0
        next_user = clock()
        while not self.stopping:
            self._drain_inbound(spout, True, block_s=0.0 if self.active else 0.05)
            if clock() >= next_user:
                next_user = clock() + 0.5
                self.collect_user_metrics(clock())
            if rel is not None:
                for tup_id in rel.take_immediate():
                    spout.ack(tup_id)
                if clock() >= next_check:
                    next_check = clock() + 1.0
                    for tup_id in rel.expire():
                        spout.fail(tup_id)
                    self.metrics.log_if_changed(self._log, rel)
            if self._held and not self._push_held():
                # the outbound queue is full (backpressure): no next_tuple until it drains
                t0 = clock()
                self._drain_inbound(spout, True, block_s=0.001)
                self.time_blocked_s += clock() - t0
                continue
            if not self.active:
                emitter.flush()
                continue
            before = emitter.emitted
            if rel is not None:
                room = rel.room()
                if room <= 0:
                    # topology.max.spout.pending reached: wait for acks, do not call next_tuple
                    emitter.flush()
                    last_flush = clock()
                    self._drain_inbound(spout, True, block_s=0.001)
                    continue
                for _ in range(min(64, room)):
                    next_tuple()
            else:
                for _ in range(64):
                    next_tuple()
            now = clock()
            if emitter.emitted == before:
                # nothing to emit: flush what we have and wait a little (Storm's 1 ms sleep)
                emitter.flush()
                last_flush = now
                self._drain_inbound(spout, True, block_s=0.001)
            elif now - last_flush >= interval:
                emitter.flush()
                last_flush = now
        emitter.flush()
        spout.close()

    # --- bolt ---
    def _run_bolt(self, bolt: Any, icfg: InstanceConfig) -> None:
        assert self.emitter is not None and self.pplan is not None
        emitter = self.emitter
        clock = self._clock
        interval = icfg.flush_interval_s
        tick = icfg.tick_freq_s
        next_tick = clock() + tick if tick else float("inf")
        self.active = self.pplan.state is TopologyState.RUNNING
        last_flush = clock()
        process = bolt.process
        if self.reliability is not None or bolt.auto_ack or bolt.auto_fail or bolt.auto_anchor:
            process = self._wrap_process(bolt)
        next_metrics = clock() + 10.0
        next_user = clock()
        idle_flush = icfg.flush_when_idle
        while not self.stopping:
            now = clock()
            if emitter.has_pending:
                wait = max(0.0, min(last_flush + interval, next_tick) - now)
            else:
                wait = max(0.0, min(next_tick - now, 0.1))
            try:
                kind, payload = self._in.get(timeout=wait) if wait > 0 else self._in.get_nowait()
            except queue.Empty:
                kind, payload = "", None
            if kind == "batch":
                self._process_batch(payload, process)
                # take what else is queued before checking the clock again
                for _ in range(8):
                    try:
                        kind, payload = self._in.get_nowait()
                    except queue.Empty:
                        break
                    if kind == "batch":
                        self._process_batch(payload, process)
                    elif kind == "pplan":
                        self._on_plan(payload, bolt, False)
            elif kind == "pplan":
                self._on_plan(payload, bolt, False)
            now = clock()
            if now >= next_tick:
                bolt.process_tick(TupleHelper.make_tick_tuple())
                next_tick = now + (tick or 0.0)
            # flush when the batch interval is up, or at once when no input is waiting (more
            # batching would only add latency then; under load the queue is rarely empty)
            if emitter.has_pending and (now - last_flush >= interval or (idle_flush and self._in.empty())):
                emitter.flush()
                last_flush = now
            elif not emitter.has_pending:
                last_flush = now
            if now >= next_user:
                next_user = now + 0.5
                self.collect_user_metrics(now)
            if now >= next_metrics:
                next_metrics = now + 10.0
                self.metrics.log_if_changed(self._log, None)
        # Storm's IBolt.cleanup, when the bolt has one (a sink writes what it buffered)
        cleanup = getattr(bolt, "cleanup", None)
        if callable(cleanup):
            cleanup()
        emitter.flush()

    def _wrap_process(self, bolt: Any) -> Callable[[HeronTuple], None]:
        process = bolt.process
        auto_ack, auto_fail = bool(bolt.auto_ack), bool(bolt.auto_fail)
        delegate_ack, delegate_fail = bolt.delegate.ack, bolt.delegate.fail
        log = self._log

        def run(tup: HeronTuple) -> None:
            self.current = tup
            try:
                process(tup)
            except Exception:
                if not auto_fail:
                    raise
                log.exception("process() raised; failing the tuple (auto_fail)")
                delegate_fail(tup)
                return
            finally:
                self.current = None
            if auto_ack:
                delegate_ack(tup)

        return run

    def _process_batch(self, frame: bytes, process: Callable[[HeronTuple], None]) -> None:
        src = BATCH_HEADER.unpack_from(frame, HEADER_SIZE)[1]
        if self.in_bytes is not None:
            self.in_bytes.taken += len(frame)
        src_component = self._task_component.get(src, "?")
        rows = loads_batch(memoryview(frame)[BODY_OFFSET:])
        self.processed += len(rows)
        key = self._exec_key.get(src_component)
        if key is not None:
            # one subscribed stream from this source: every row is on it, no per-row count
            self.executed[key] = self.executed.get(key, 0) + len(rows)
        else:
            for row in rows:
                key = f"{src_component}/{row[0]}"
                self.executed[key] = self.executed.get(key, 0) + 1
        created = time.time()
        task = src
        if self._capture is not None:
            cap = self._capture
            for row in rows:
                cap.write(json.dumps({"task": self.task_id, "source": src_component, "source_task": task,
                                      "stream": row[0], "values": list(row[1])}, default=repr) + "\n")
            cap.flush()
        t0 = time.perf_counter()
        if self.reliability is None:
            # tuple.__new__ directly: the namedtuple constructor is a Python-level lambda
            new, cls = tuple.__new__, HeronTuple
            for stream, values in rows:
                process(new(cls, (None, src_component, stream, task, values, created, None)))
        else:
            for row in rows:
                t = TrackedTuple(None, src_component, row[0], task, row[1], created, row[2] if len(row) > 2 else ())
                t.ack_val = 0
                process(t)
        dt = time.perf_counter() - t0
        self.exec_s += dt
        self.exec_total_s += dt
        self.exec_count += len(rows)

    def _on_results(self, frame: bytes, spout: Any) -> None:
        rel = self.reliability
        assert rel is not None
        for outcome, root in RESULT_RECORD.iter_unpack(memoryview(frame)[BODY_OFFSET:]):
            tup_id = rel.resolve(root, outcome)
            if tup_id is rel.UNKNOWN:
                continue  # resolved before (a late result, or timed out here first)
            if outcome == RESULT_ACKED:
                spout.ack(tup_id)
            else:  # failed or timed out: Storm calls fail() for both
                spout.fail(tup_id)

    def _drain_inbound(self, user: Any, is_spout: bool, block_s: float) -> None:
        try:
            kind, payload = self._in.get(timeout=block_s) if block_s > 0 else self._in.get_nowait()
        except queue.Empty:
            return
        while True:
            if kind == "pplan":
                self._on_plan(payload, user, is_spout)
            elif kind == "acks" and self.reliability is not None:
                self._on_results(payload, user)
            else:
                self._log.warning("spout task %d got an unexpected %s; dropped", self.task_id, kind)
            try:
                kind, payload = self._in.get_nowait()
            except queue.Empty:
                return
