"""The component host: owns one user component (a spout or a bolt) and turns inputs (tuple
batches, ticks, ack results, plan changes) into calls of the user's code, and the user's
emits into frames handed to a sink. No sockets, no threads, no clock of its own.

Three runners drive it: the instance's execution thread (instance/execution.py), the
in-process test runner (heron_py/testing/runner.py) and the PySpark batch runner
(heron_py/spark/batch.py). They differ only in where the sink's frames go and when they
call the host.

    host = make_host(plan, task_id, sink=frames.extend)
    host.initialize()          # user.initialize(conf, context)
    host.start()               # a spout is activated when the topology runs
    host.process_frame(frame)  # bolt: one TUPLE_BATCH frame -> process() per tuple
    host.next_tuples(64)       # spout: next_tuple() calls
    host.flush()               # emitted tuples -> frames -> sink
"""

from __future__ import annotations

import json
import logging
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any

from heron_py.api import global_metrics
from heron_py.api.serializer import ValueCodec, load_serializer, value_codecs
from heron_py.api.topology_context import TopologyContext
from heron_py.api.tuple import HeronTuple, TrackedTuple, TupleHelper
from heron_py.common.config import TICK, InstanceConfig, ReliabilityConfig, max_frame_bytes
from heron_py.common.config_codec import restore_config
from heron_py.common.framing import BATCH_HEADER, BODY_OFFSET, HEADER_SIZE, RESULT_ACKED, RESULT_RECORD
from heron_py.common.serialization import (
    ONE,
    RUN_LEN,
    body_rows,
    expand_runs,
    loads_body,
    loads_user_object,
    row_count,
    run_tuples,
)
from heron_py.planner.model import ComponentKind, PhysicalPlan, TopologyState, has_task
from heron_py.runtime.emitter import Emitter, StormArity
from heron_py.runtime.hooks import Hooks, auto_hooks
from heron_py.runtime.reliability import Reliability, TaskMetrics
from heron_py.runtime.tracked import BoltAck, deliver, received_roots

Sink = Callable[[list[bytes]], None]
# what a runner may watch: received rows (source component, source task, [(stream, values, ...)])
Observer = Callable[[str, int, list[Any]], None]
# and emitted tuples (stream, values), before routing: the batch runner keeps them as output
Tap = Callable[[str, Sequence[Any]], None]
_FIRST = itemgetter(0)  # a row's first value, in C


@dataclass(frozen=True)
class HostOptions:
    # None: from the topology's config; runners without a tracker (in-process, batch) pass
    # ReliabilityConfig() so a spout never waits for acks that cannot come
    reliability: ReliabilityConfig | None = None
    observer: Observer | None = None
    tap: Tap | None = None
    rng: random.Random | None = None
    clock: Callable[[], float] = time.monotonic
    # wakes the runner's task thread at once (a component that polls calls it from its own
    # threads when input arrived, so a multilang emit waiting for task ids is answered now)
    wake: Callable[[], None] | None = None
    # the receivers' frame limit, which the emitter's batches keep under: an instance's is its
    # links' (from its executor); None: the topology's, from the plan (the in-process runners)
    max_frame: int | None = None


@dataclass
class ExecCounters:
    """A task's execution counters: a bolt host's execute counts and latencies, and every task's
    busy time, which its execution loop adds (instance/execution.py). Written by the host's
    caller thread only; the instance's gateway thread reads them for reports (one writer per
    field, no lock)."""

    processed: int = 0
    executed: dict[str, int] = field(default_factory=dict)  # "source/stream" -> tuples, never reset
    exec_total_s: float = 0.0
    interval_count: int = 0  # since the last take_latency_ms
    interval_s: float = 0.0
    # the execution thread's time at work (user code, serializing, emitting, flushing): not
    # waiting for input, not sleeping idle, not blocked on a full outbound queue (the time
    # blocked has its own counter); what a task processed over it is its true rate (DS2)
    busy_s: float = 0.0
    # the turn at work now: its start on ``clock`` (0.0 while the loop waits for input) and the
    # time blocked when it began. A report reads busy_s plus the turn so far (busy_now), so a
    # long turn (a backlog of large batches at a slow bolt) shows in the windows it runs in,
    # not all at once after it ends; the loop sets the three (instance/execution.py BoltLoop)
    turn_from: float = 0.0
    turn_blocked: float = 0.0
    clock: Callable[[], float] = time.monotonic

    def busy_now(self, blocked: float) -> float:
        """busy_s with the turn at work now (``blocked``: the outbound queue's time blocked)."""
        t = self.turn_from
        if not t:
            return self.busy_s
        return self.busy_s + max(0.0, self.clock() - t - (blocked - self.turn_blocked))

    def take_latency_ms(self) -> float:
        # read-and-reset by the reader: a report may move a batch into the next interval
        n, total = self.interval_count, self.interval_s
        self.interval_count, self.interval_s = 0, 0.0
        return total / n * 1000.0 if n else 0.0


class _Delegate:
    """Our side of heronpy's ``emit``/``ack``/``fail``/``log`` (heron_py.api ComponentDelegate)."""

    def __init__(self, host: ComponentHost, logger: logging.Logger) -> None:
        self._host = host
        self.logger = logger

    def emit(self, tup: Sequence[Any], stream: str = "default", anchors: Any = None,
             direct_task: int | None = None, need_task_ids: bool = False,
             tup_id: Any = None) -> list[int] | None:
        hooks = self._host.hooks
        if hooks is None:
            return self._emit(tup, stream, anchors, direct_task, need_task_ids, tup_id)
        sent = self._emit(tup, stream, anchors, direct_task, True, tup_id)  # the hook wants the tasks
        hooks.emit(tup, stream, sent)
        return sent if need_task_ids else None

    def _emit(self, tup: Sequence[Any], stream: str, anchors: Any, direct_task: int | None, need_task_ids: bool,
              tup_id: Any) -> list[int] | None:
        host = self._host
        if host.tap is not None:
            host.tap(stream, tup)
        if host.encode is not None:
            tup = host.encode(tup)
        emitter = host.emitter
        rel = host.reliability
        if rel is None:
            return emitter.emit(tup, stream, direct_task, need_task_ids)
        if host.is_spout:
            if tup_id is None:
                return emitter.emit(tup, stream, direct_task, need_task_ids)
            root = rel.new_root()
            sent, xor = emitter.emit_root(tup, stream, direct_task, need_task_ids, root)
            rel.emitted(root, tup_id, xor)
            return sent
        if anchors is None:
            anchors = [host.current] if host.auto_anchor and host.current is not None else ()
        elif isinstance(anchors, HeronTuple):
            anchors = [anchors]
        tracked = [a for a in anchors if isinstance(a, TrackedTuple) and a.roots]
        if not tracked:
            return emitter.emit(tup, stream, direct_task, need_task_ids)
        return emitter.emit_anchored(tup, stream, direct_task, need_task_ids, tracked)

    def ack(self, tup: Any) -> None:
        host = self._host
        m = host.metrics
        m.acked += 1
        # the metric times 1 ack in latency_sample_every (the fast path's rule); hooks get every one
        sampled = not (m.acked - 1) % host.config.latency_sample_every
        age = _age_ms(tup) if sampled or host.hooks is not None else 0.0
        if sampled:
            m.process_ms_total += age
            m.process_samples += 1
        if host.reliability is not None and isinstance(tup, TrackedTuple) and tup.roots:
            host.emitter.ack(tup)
        if host.hooks is not None:
            host.hooks.bolt_ack(tup, age)

    def fail(self, tup: Any) -> None:
        host = self._host
        host.metrics.failed += 1
        if host.reliability is not None and isinstance(tup, TrackedTuple) and tup.roots:
            host.emitter.fail(tup)
        if host.hooks is not None:
            host.hooks.bolt_fail(tup, _age_ms(tup))

    def log(self, message: str, level: int | str | None = None) -> None:
        if isinstance(level, str):
            lvl = logging.getLevelName(level.upper())
            level = lvl if isinstance(lvl, int) else logging.INFO
        self.logger.log(level if level is not None else logging.INFO, message)


class ComponentHost:
    """What spouts and bolts share: config, context, emitter, reliability, user metrics."""
    # a spout's: whether a next_tuple call may emit more than one tuple; then next_tuples
    # looks at max pending before each call (set when a batch emit is bound, or when a call is
    # seen to emit more)
    _emits_batches = False
    is_spout = False

    def __init__(self, plan: PhysicalPlan, task_id: int, sink: Sink, options: HostOptions = HostOptions()) -> None:
        topo = plan.topology
        self.plan = plan
        self.task_id = task_id
        self.component = plan.task(task_id).component
        comp = topo.component(self.component)
        raw = {**topo.config, **comp.config}
        self._raw_conf = raw
        self.config = InstanceConfig.from_config(raw)
        self.conf = restore_config(raw)  # what the user's initialize() gets (and may change)
        self.clock = options.clock
        self.tap = options.tap
        self.observer = options.observer
        self.metrics = TaskMetrics()
        rel = options.reliability if options.reliability is not None else ReliabilityConfig.from_config(raw)
        self.reliability = Reliability.from_config(rel, clock=self.clock, metrics=self.metrics,
                                                   sample_every=self.config.latency_sample_every)
        self.context = TopologyContext(topo, plan.packing, task_id, self.conf)
        context = self.context  # custom groupings are the topology's: prepared once, with the first
        self.emitter = Emitter(plan, task_id, self.config.batch_size, sink, custom_loader=loads_user_object,
                               prepare_custom=lambda g, c, s, targets: g.prepare(context, c, s, targets),
                               rng=options.rng,
                               max_frame=max_frame_bytes(topo.config) if options.max_frame is None
                               else options.max_frame)
        self.log = logging.getLogger(f"{self.component}-{task_id}")
        self._wake = options.wake
        self.user: Any = self._new_user()
        if getattr(type(self.user), "heron_storm_arity", False):  # a Storm component: Storm's rule
            self.emitter.storm_arity = StormArity(self.log, self.component, task_id)
        self.auto_anchor = bool(getattr(self.user, "auto_anchor", False))
        self.current: HeronTuple | None = None  # the input being processed (auto_anchor)
        self.active = False
        self.user_metrics: dict[str, Any] = {}
        self._user_due: dict[str, float] = {}
        self.hooks: Hooks | None = None  # task hooks, when the component has any
        ser = load_serializer(self.config.serializer, self.conf)
        # topology.serializer.classname: values become bytes at emit and values again at receive
        self.encode: ValueCodec | None = None
        self.decode: ValueCodec | None = None
        if ser is not None:
            self.encode, self.decode = value_codecs(ser)
        # a component with input of its own (a multilang subprocess's emits and acks) defines
        # heron_poll(); the runner calls it on the task's thread at least every poll_s
        self.poll_s: float | None = None
        self._poll: Callable[[], None] | None = None
        # and, when it says it has nothing in hand (heron_busy() false), at least every
        # idle_poll_s instead, if it names one (heron_idle_poll_interval_s): a producer waiting
        # for no report needs no poll every 5 ms
        self.idle_poll_s: float | None = None
        self._busy: Callable[[], bool] | None = None
        self._ack_many: Callable[[list[Any]], None] | None = None
        # the user's attributes initialize() bound to the emitter (None: not bound yet)
        self._bound: tuple[str, ...] | None = None
        self._left_at = 0  # the newest plan's version that did not hold this task (0: none yet)
        self.removed = False  # the newest plan does not hold this task: a rescale removed it

    def _new_user(self) -> Any:
        comp = self.plan.topology.component(self.component)
        user = loads_user_object(comp.class_ref.data)(_Delegate(self, self.log))
        if self._wake is not None and hasattr(type(user), "heron_poll"):
            user.heron_wake = self._wake  # before initialize(): subprocesses start there
        return user

    def reset_user(self) -> None:
        """Effectively once, at a restore after the first: the component is closed as at a task's
        end and made anew (as Heron's instance does), so state it keeps outside the State object
        (a window's tuples, a counter made in initialize) is the checkpoint's, never the
        rolled-back run's. The caller then calls init_state, initialize and start."""
        self.emitter.discard()
        self.close()  # what closing emits goes before the restore's report: the stream manager drops it
        self.emitter.discard()
        self.hooks = None
        self.active = False
        self._new_context()
        self.user = self._new_user()
        self._bound = None  # the old component's bindings went with it
        self.auto_anchor = bool(getattr(self.user, "auto_anchor", False))

    def _new_context(self) -> None:
        """The new component gets what the first one got: its own config dict and a context
        without the old one's metrics and task hooks, so its initialize() registers them again
        as on a task's first start (a connector's metric registered twice was an error that
        crashed the task at every restore). The runtime's own registrations (heronpy's
        process-wide ``__auto__`` counter, registered once per process) carry over."""
        old = self.context
        self.conf = restore_config(self._raw_conf)
        self.context = TopologyContext(self.plan.topology, self.plan.packing, self.task_id, self.conf)
        auto = old.registered_metrics.get(global_metrics.root_name)
        if auto is not None:
            self.context.registered_metrics[global_metrics.root_name] = auto
        self._user_due.clear()

    def initialize(self) -> None:
        self.user.initialize(self.conf, self.context)
        # heronpy registers its process-wide counter (global_metrics) with every task's metrics
        global_metrics.init(self.context.get_metrics_collector(), max(1, int(self.config.metrics_interval_s or 10)))
        poll = getattr(self.user, "heron_poll", None)  # contract: api/contracts.py PolledComponent
        if callable(poll):
            self._poll = poll
            self.poll_s = float(getattr(self.user, "heron_poll_interval_s", 0.005))
            idle = getattr(self.user, "heron_idle_poll_interval_s", None)
            busy = getattr(self.user, "heron_busy", None)  # contract: api/contracts.py BusyComponent
            if idle is not None and callable(busy):
                self.idle_poll_s = max(self.poll_s, float(idle))
                self._busy = busy
        # hooks are added in initialize(): only then is it known whether emits must be seen
        hooks = [*auto_hooks(self.conf), *self.context.task_hooks]
        if hooks:
            self.hooks = Hooks(hooks, self.task_id)
            self.hooks.prepare(self.conf, self.context)
        self._bind_emit_paths()
        # a spout that takes its acks a list at a time (broker spouts: one call per result
        # frame, not per id), when no hook must see each ack
        ack_many = getattr(self.user, "heron_ack_many", None)  # contract: api/contracts.py BatchAckSource
        self._ack_many = ack_many if self.is_spout and self.hooks is None and callable(ack_many) else None
        if self._ack_many is None and self.is_spout and self.hooks is None and _keeps_noop_ack(self.user):
            self._ack_many = _ignore  # a spout without ack(): no call per acked id

    def _bind_emit_paths(self) -> None:
        """Binds the user's hot calls straight to the emitter when nothing must see each emit
        (no hooks, no tap, no serializer), replacing what an earlier call bound: the fast
        closures hold the routers of the plan they were made under."""
        user = self.user
        for name in self._bound or ():
            delattr(user, name)  # back to the class's method until bound again below
        bound: list[str] = []
        if self.hooks is None and self.tap is None and self.encode is None:
            if self.reliability is None:
                bound += _bind_fast_emit(user, self.emitter, self.config.specialized_emit)
            elif self.config.specialized_emit:
                bound += _bind_tracked_fast_paths(self)
            # contracts: api/contracts.py BatchEmitSource, TrackedBatchEmitSource
            if self.is_spout and hasattr(type(user), "heron_emit_many"):
                # an untracked batch in one call (Streamlet sources): nothing needs to see each emit
                user.heron_emit_many = self.emitter.emit_many
                bound.append("heron_emit_many")
            if self.is_spout and hasattr(type(user), "heron_emit_one_many"):
                # the same for a one-field stream's bare values (BareBatchEmitSource)
                user.heron_emit_one_many = self.emitter.emit_one_many
                bound.append("heron_emit_one_many")
        if "heron_emit_tracked_many" in bound or "heron_emit_tracked_run" in bound:
            self._emits_batches = True  # a broker spout's read per call: max pending before each
        self._bound = tuple(bound)

    def start(self) -> None:
        self._set_active(self.plan.state is TopologyState.RUNNING)

    def set_plan(self, plan: PhysicalPlan) -> None:
        """A newer physical plan (an older one is ignored). A live rescale's plan switches this
        task in place: its emitter flushes what it holds (routed under the old plan) and routes
        by the new one, the fast emit paths are bound again, and the user's context answers for
        the new packing (effectively once, a restore follows: heron_py/runtime/stateful.py). A
        plan without this task (the rescale removed it) deactivates a spout, and what the task
        still emits (the rest of its queue, processed before it exits) is routed by the new plan
        too.
        Then activation changes reach a spout's activate/deactivate."""
        if plan.version < max(self.plan.version, self._left_at):
            return
        if not has_task(plan, self.task_id):
            if not self.removed:
                self.log.info("task %d (%s) is not in physical plan v%d: a rescale removed it; it stops when its "
                              "container's executor stops it", self.task_id, self.component, plan.version)
            self.removed = True
            self._left_at = plan.version
            # what it still emits (its queue's rest, processed before it exits) goes to the
            # consumers' tasks of the new plan, as every other task's does
            if self.emitter.set_plan(plan, self.plan.task(self.task_id)) and self._bound is not None:
                self._bind_emit_paths()
            self._set_active(False)
            return
        self.removed = False
        self._switch(plan)
        self.plan = plan
        self._set_active(plan.state is TopologyState.RUNNING)

    def _switch(self, plan: PhysicalPlan) -> None:
        """This task's view of the topology and its routes, moved to ``plan`` in place."""
        old = self.plan
        if plan.packing != old.packing or plan.topology != old.topology:
            # the context the user got (and may keep) answers for the new plan, the same object;
            # first, as a custom grouping's new prepare reads it
            self.context.set_plan(plan.topology, plan.packing)
        if self.emitter.set_plan(plan) and self._bound is not None:
            self._bind_emit_paths()

    def _set_active(self, active: bool) -> None:
        self.active = active

    def poll(self) -> None:
        if self._poll is not None:
            self._poll()

    def poll_wait(self) -> float | None:
        """The longest the task's loop may wait before it calls ``poll`` again: the component's
        poll interval, or its idle one while it says it is not busy; None: no polling."""
        busy = self._busy
        if busy is None or busy():
            return self.poll_s
        return self.idle_poll_s

    def flush(self) -> None:
        self.emitter.flush()

    @property
    def has_pending(self) -> bool:
        return self.emitter.has_pending

    def collect_user_metrics(self, now: float) -> None:
        """Reads each registered metric when its time bucket is due."""
        registered = self.context.registered_metrics
        for name, (metric, bucket) in list(registered.items()):
            due = self._user_due.get(name)
            if due is None:
                self._user_due[name] = now + bucket
            elif now >= due:
                self._user_due[name] = now + bucket
                try:
                    self.user_metrics[name] = metric.get_value_and_reset()
                except Exception as e:  # a user metric's bug must not kill the task
                    self.log.warning("user metric %s failed: %s", name, e)

    def close(self) -> None:
        if self.hooks is not None:
            self.hooks.clean_up()
        self.emitter.flush()


class SpoutHost(ComponentHost):
    is_spout = True

    def _set_active(self, active: bool) -> None:
        if active == self.active:
            return
        self.active = active
        self.user.activate() if active else self.user.deactivate()

    def room(self) -> int:
        """How many more tracked tuples may be pending (topology.max.spout.pending)."""
        return self.reliability.room() if self.reliability is not None else 1 << 30

    def next_tuples(self, n: int, budget_s: float | None = None) -> int:
        """Calls next_tuple up to ``n`` times (fewer when max pending allows fewer, or once
        ``budget_s`` has passed: a spout that sleeps in next_tuple must not hold its emits back
        for n sleeps); returns the number of tuples emitted."""
        next_tuple = self.user.next_tuple
        before = self.emitter.emitted
        rel = self.reliability
        if self._emits_batches and rel is not None and rel.max_pending is not None:
            # max pending is looked at before each call, as Storm and Heron do: a call of this
            # spout emits many tuples (a broker spout's batch), so the room before the first
            # call does not say how many calls fit
            clock = self.clock
            deadline = None if budget_s is None else clock() + budget_s
            room = rel.room
            for _ in range(n):
                if room() <= 0:
                    break
                next_tuple()
                if deadline is not None and clock() >= deadline:
                    break
            return self.emitter.emitted - before
        # a tuple per call: the room before the first call is the number of calls that fit
        calls = min(n, self.room())
        if budget_s is None:
            for _ in range(calls):
                next_tuple()
        else:
            clock = self.clock
            deadline = clock() + budget_s
            for i in range(calls):
                next_tuple()
                if clock() >= deadline:
                    calls = i + 1
                    break
        emitted = self.emitter.emitted - before
        if emitted > calls:
            self._emits_batches = True  # from now on, max pending is looked at before each call
        return emitted

    def waited_for_input(self) -> bool:
        """Whether the last next_tuple waited on the spout's own source: a spout that blocks in
        next_tuple until its first record (the Kafka spout's poll) sets ``heron_waited``, and the
        loop then adds no idle wait of its own, which would only delay the next record."""
        return getattr(self.user, "heron_waited", False) is True  # contract: api/contracts.py WaitingSource

    def acks_due(self) -> None:
        """Acks tuples whose tree completed at emit (no consumer took a copy)."""
        if self.reliability is not None:
            done = self.reliability.take_immediate()
            if self._ack_many is not None:
                if done:
                    self._ack_many(done)
                return
            for tup_id in done:
                self.user.ack(tup_id)
                if self.hooks is not None:
                    self.hooks.spout_ack(tup_id, 0.0)

    def expire(self) -> None:
        """Fails tuples whose tree did not complete in time (checked by the task itself too)."""
        if self.reliability is not None:
            for tup_id in self.reliability.expire():
                self.user.fail(tup_id)
                if self.hooks is not None:
                    self.hooks.spout_fail(tup_id, self.reliability.last_latency_ms)

    def on_results(self, frame: bytes) -> None:
        """An ACK_RESULT frame from the stream manager: ack() or fail() once per root."""
        rel = self.reliability
        if rel is None:
            self.log.warning("spout task %d got ack results in at-most-once mode; ignored", self.task_id)
            return
        if self.hooks is None:
            # runs of acks resolved in one call each (one clock read), handed over in one call
            # to a spout that takes a list (heron_ack_many), else ack() per id; a fail is
            # delivered in its place in the frame's order (the acks before it first)
            ack_many, user = self._ack_many, self.user
            records = list(RESULT_RECORD.iter_unpack(memoryview(frame)[BODY_OFFSET:]))
            n, i = len(records), 0
            while i < n:
                acked: list[Any] = []
                i = rel.resolve_acked_run(records, i, acked)
                if acked:
                    if ack_many is not None:
                        ack_many(acked)
                    else:
                        for tup_id in acked:
                            user.ack(tup_id)
                if i < n:
                    outcome, root = records[i]
                    i += 1
                    tup_id = rel.resolve(root, outcome)
                    if tup_id is not rel.UNKNOWN:
                        user.fail(tup_id)  # failed or timed out: Storm calls fail() for both
            return
        for outcome, root in RESULT_RECORD.iter_unpack(memoryview(frame)[BODY_OFFSET:]):
            tup_id = rel.resolve(root, outcome)
            if tup_id is rel.UNKNOWN:
                continue  # resolved before (a late result, or timed out here first)
            if outcome == RESULT_ACKED:
                self.user.ack(tup_id)
                if self.hooks is not None:
                    self.hooks.spout_ack(tup_id, rel.last_latency_ms)
            else:  # failed or timed out: Storm calls fail() for both
                self.user.fail(tup_id)
                if self.hooks is not None:
                    self.hooks.spout_fail(tup_id, rel.last_latency_ms)

    def close(self) -> None:
        if self.hooks is not None:
            self.hooks.clean_up()
        self.emitter.flush()
        self.user.close()


class BoltHost(ComponentHost):
    def __init__(self, plan: PhysicalPlan, task_id: int, sink: Sink, options: HostOptions = HostOptions()) -> None:
        super().__init__(plan, task_id, sink, options)
        self.counters = ExecCounters()
        self._task_component = {t.task_id: t.component for t in plan.packing.tasks}
        streams: dict[str, tuple[str, ...]] = {}
        for i in plan.topology.component(self.component).inputs:
            streams[i.component] = (*streams.get(i.component, ()), i.stream)
        # one subscribed stream from a source: every row is on it, so no per-row count
        self._exec_key = {src: f"{src}/{s[0]}" for src, s in streams.items() if len(s) == 1}
        self._process: Callable[[HeronTuple], None] = self.user.process
        # a bolt that takes a whole batch of untracked tuples at once (streamlet operators):
        # heron_process_batch(values list) -> (values to emit on heron_batch_stream, failed count)
        self._batch: Callable[[list[Any]], tuple[list[Any], int]] | None = None
        self._batch_stream = "default"
        # the bolt's batch takes each input's one value bare and returns its outputs bare
        # (heron_batch_one: the Streamlet operators, whose streams have one field)
        self._batch_one = False
        self.tick_s: float | None = None

    def set_plan(self, plan: PhysicalPlan) -> None:
        super().set_plan(plan)
        if self.plan is plan:
            # the tasks a rescale added are named as sources too; a removed task's id stays (an
            # id is never reused), so a batch it sent before it stopped still names its component
            self._task_component.update((t.task_id, t.component) for t in plan.packing.tasks)

    def initialize(self) -> None:
        super().initialize()
        # read after initialize(): heronpy's window bolts set their tick rate there
        self.tick_s = TICK.parse(self.conf)
        user = self.user
        self._process = user.process  # bound here: a restore (reset_user) makes a new component
        # the wrapper keeps the current input for auto_anchor and acks or fails it for
        # auto_ack/auto_fail; without those flags it would only cost a call per tuple
        if user.auto_ack or user.auto_fail or user.auto_anchor:
            self._process = self._wrap_process()
        if self.hooks is not None:
            self._process = _timed(self._process, self.hooks)
        # per-batch processing only where nothing must see each tuple: no hooks (execute and
        # ack per tuple), no tap or serializer (each emitted value), no auto_* wrapper
        batch = getattr(user, "heron_process_batch", None)  # contract: api/contracts.py BatchSink
        self._batch = None
        if (callable(batch) and self.hooks is None and self.tap is None and self.encode is None
                and not (user.auto_ack or user.auto_fail or user.auto_anchor)):
            self._batch = batch
            self._batch_stream = str(getattr(user, "heron_batch_stream", "default"))
            self._batch_one = getattr(user, "heron_batch_one", False) is True

    def _wrap_process(self) -> Callable[[HeronTuple], None]:
        """Storm's BasicBolt behaviour (auto_anchor, auto_ack, auto_fail) around process()."""
        user = self.user
        process = user.process
        auto_ack, auto_fail = bool(user.auto_ack), bool(user.auto_fail)
        delegate_ack, delegate_fail = user.delegate.ack, user.delegate.fail
        log = self.log

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

    def process_frame(self, frame: bytes) -> None:
        """One TUPLE_BATCH frame: process() per tuple."""
        src = BATCH_HEADER.unpack_from(frame, HEADER_SIZE)[1]
        self.process_body(src, memoryview(frame)[BODY_OFFSET:])

    def process_body(self, src: int, body: bytes | memoryview) -> None:
        """A batch body (see heron_py.common.serialization) from task ``src``: its rows, then its
        default-stream values."""
        src_component = self._task_component.get(src, "?")
        rows, vals, ids = loads_body(body)
        if self.decode is not None or self.observer is not None:
            rows, vals, ids = body_rows(rows, vals, ids), None, None
            if self.decode is not None:
                decode = self.decode
                rows = [(r[0], decode(r[1]), *r[2:]) for r in rows]
            if self.observer is not None:
                self.observer(src_component, src, rows)
        n = self._count_received(src_component, rows, vals)
        c = self.counters
        if self._batch is not None and (self.reliability is None or not _tracked(rows, ids)):
            self._run_batch(rows, vals, n)
            return
        created = time.time()
        process = self._process
        # tuple.__new__ directly: the namedtuple constructor is a Python-level lambda
        new = tuple.__new__
        t0 = time.perf_counter()
        if self.reliability is None:
            cls = HeronTuple
            if rows:
                for row in rows:
                    if len(row) == RUN_LEN:  # a run: untracked values of one stream
                        stream = row[0]
                        for v in run_tuples(row):
                            process(new(cls, (None, src_component, stream, src, v, created, None)))
                    else:
                        process(new(cls, (None, src_component, row[0], src, row[1], created, None)))
            if vals:
                for v in vals:
                    process(new(cls, (None, src_component, "default", src, v, created, None)))
        else:
            tracked = TrackedTuple
            if rows:
                for row in rows:
                    if len(row) == RUN_LEN:  # a run: untracked values of one stream
                        stream = row[0]
                        for v in run_tuples(row):
                            process(new(tracked, (None, src_component, stream, src, v, created, ())))
                    else:
                        process(new(tracked, (None, src_component, row[0], src, row[1], created,
                                              received_roots(row[2]) if len(row) > 2 else ())))
            if vals:
                if ids is None:
                    for v in vals:
                        process(new(tracked, (None, src_component, "default", src, v, created, ())))
                else:
                    deliver(process, tracked, src_component, src, created, vals, ids)
        dt = time.perf_counter() - t0
        c.exec_total_s += dt
        c.interval_s += dt
        c.interval_count += n

    def _count_received(self, src_component: str, rows: list[Any] | None, vals: list[Any] | None) -> int:
        """Counts a received batch's tuples as processed and executed (per source stream);
        returns how many it holds."""
        n = (row_count(rows) if rows else 0) + (len(vals) if vals else 0)
        c = self.counters
        c.processed += n
        key = self._exec_key.get(src_component)
        if key is not None:
            c.executed[key] = c.executed.get(key, 0) + n
            return n
        for row in rows or ():
            k = f"{src_component}/{row[0]}"
            c.executed[k] = c.executed.get(k, 0) + (len(row[3]) if len(row) == RUN_LEN else 1)
        if vals:
            k = f"{src_component}/default"
            c.executed[k] = c.executed.get(k, 0) + len(vals)
        return n

    def _run_batch(self, rows: list[Any] | None, vals: list[Any] | None, n: int) -> None:
        """The whole batch in one call of the bolt's heron_process_batch (no tuple is tracked:
        nothing to anchor or ack per tuple); its outputs in one emit call. An input the bolt
        failed is counted as failed, the others as acked."""
        assert self._batch is not None
        one = self._batch_one  # the bolt takes each input's one value bare, and returns bare outputs
        if not rows:
            values = []
        elif len(rows) == 1 and len(rows[0]) == RUN_LEN:  # the usual batch emit's body: one run
            run = rows[0]
            values = run[3]
            if (run[2] == ONE) != one:
                values = list(map(_FIRST, values)) if one else list(zip(values))
        else:
            values = [r[1][0] if one else r[1] for r in expand_runs(rows)]
        if vals:
            values.extend(map(_FIRST, vals) if one else vals)
        t0 = time.perf_counter()
        outs, failed = self._batch(values)
        if outs:
            if one:
                self.emitter.emit_one_many(outs, self._batch_stream)
            else:
                self.emitter.emit_many(outs, self._batch_stream)
        dt = time.perf_counter() - t0
        m = self.metrics
        m.acked += n - failed
        m.failed += failed
        c = self.counters
        c.exec_total_s += dt
        c.interval_s += dt
        c.interval_count += n

    def tick(self) -> None:
        self.user.process_tick(TupleHelper.make_tick_tuple())

    def close(self) -> None:
        if self.hooks is not None:
            self.hooks.clean_up()
        # Storm's IBolt.cleanup, when the bolt has one (a sink writes what it buffered)
        cleanup = getattr(self.user, "cleanup", None)
        if callable(cleanup):
            cleanup()
        self.emitter.flush()


def _keeps_noop_ack(user: Any) -> bool:
    """Whether a spout's ack is the API's own, which does nothing (the spout keeps no state
    per message id), and nothing on the instance replaces it."""
    from heron_py.api.spout.spout import Spout

    return getattr(type(user), "ack", None) is Spout.ack and "ack" not in getattr(user, "__dict__", {})


def _ignore(ids: list[Any]) -> None:
    """heron_ack_many for a spout whose ack does nothing."""


def _tracked(rows: list[Any] | None, ids: Any) -> bool:
    """Whether any tuple of a batch carries roots: hot values with ids, or a row with a third
    item (an untracked row is (stream, values))."""
    if ids is not None:
        return len(ids) > 0
    if not rows:
        return False
    return 3 in set(map(len, rows))  # (stream, values, roots); a run has 4 items, untracked


def _age_ms(tup: Any) -> float:
    """How long ago a received tuple was made into a tuple here (heronpy's process latency)."""
    created = getattr(tup, "creation_time", None)
    return (time.time() - created) * 1000.0 if isinstance(created, float) and created else 0.0


def _timed(process: Callable[[HeronTuple], None], hooks: Hooks) -> Callable[[HeronTuple], None]:
    """process() with the bolt_execute hook after each call, with its latency."""
    perf = time.perf_counter

    def run(tup: HeronTuple) -> None:
        t0 = perf()
        process(tup)
        hooks.bolt_execute(tup, (perf() - t0) * 1000.0)

    return run


def make_host(plan: PhysicalPlan, task_id: int, sink: Sink, options: HostOptions = HostOptions()) -> ComponentHost:
    """A SpoutHost or a BoltHost for ``task_id``; the user's classes must be importable."""
    kind = plan.topology.component(plan.task(task_id).component).kind
    return (SpoutHost if kind is ComponentKind.SPOUT else BoltHost)(plan, task_id, sink, options)


def jsonl_observer(task_id: int, out: Any) -> Observer:
    """An observer that writes every received tuple as one JSON line (the test capture)."""
    def write(source: str, source_task: int, rows: list[Any]) -> None:
        for row in rows:
            out.write(json.dumps({"task": task_id, "source": source, "source_task": source_task,
                                  "stream": row[0], "values": list(row[1])}, default=repr) + "\n")
        out.flush()

    return write


def _bind_fast_emit(user: Any, emitter: Emitter, specialize: bool = True) -> list[str]:
    """At most once, an emit needs no delegate: bind heronpy's ``emit`` signature straight to
    the emitter on this instance (one Python call per emit instead of three). Only when the
    user's class keeps the API's own ``emit``. Returns the attributes it set."""
    from heron_py.api.bolt.bolt import Bolt
    from heron_py.api.spout.spout import Spout

    em = emitter.emit
    if isinstance(user, Spout) and type(user).emit is Spout.emit:
        def spout_emit(tup: Sequence[Any], tup_id: Any = None, stream: str = "default",
                       direct_task: int | None = None, need_task_ids: bool = False) -> list[int] | None:
            return em(tup, stream, direct_task, need_task_ids)

        user.emit = spout_emit  # type: ignore[method-assign]
        return ["emit"]
    if isinstance(user, Bolt) and type(user).emit is Bolt.emit:
        fast = emitter.default_stream_emit() if specialize else None
        if fast is not None:
            user.emit = fast  # type: ignore[method-assign]
            return ["emit"]

        def bolt_emit(tup: Sequence[Any], stream: str = "default", anchors: Any = None,
                      direct_task: int | None = None, need_task_ids: bool = False) -> list[int] | None:
            return em(tup, stream, direct_task, need_task_ids)

        user.emit = bolt_emit  # type: ignore[method-assign]
        return ["emit"]
    return []


def _bind_tracked_fast_paths(host: ComponentHost) -> list[str]:
    """At least once, without hooks, tap or serializer: the hot calls bound straight to the
    emitter on this instance, each falling back to the delegate for what it does not cover.
    A spout's emit with a message id skips two calls; a bolt's emit anchored to one input
    and its ack skip three each. Only when the user's class keeps the API's own methods.
    Returns the attributes it set."""
    from heron_py.api.bolt.bolt import Bolt
    from heron_py.api.spout.spout import Spout

    user, emitter, rel = host.user, host.emitter, host.reliability
    assert rel is not None
    delegate = user.delegate
    if isinstance(user, Spout) and type(user).emit is Spout.emit:
        return _bind_spout_fast_paths(user, emitter, rel)
    bound: list[str] = []
    if isinstance(user, Bolt):
        if type(user).emit is Bolt.emit:
            def slow(tup: Sequence[Any], stream: str, anchors: Any, direct_task: int | None,
                     need_task_ids: bool) -> list[int] | None:
                sent: list[int] | None = delegate.emit(tup, stream, anchors, direct_task, need_task_ids, None)
                return sent

            fast = emitter.anchored_default_emit(slow)
            if fast is not None:
                user.emit = fast  # type: ignore[method-assign]
                bound.append("emit")
        if type(user).ack is Bolt.ack:
            # the process latency of 1 ack in ``every``, the first included (Storm samples its
            # stats at topology.stats.sample.rate): the clock read was most of an ack's cost
            ack = BoltAck(emitter.ack_log, host.metrics, host.config.latency_sample_every, delegate.ack,
                          TrackedTuple, time.time).ack
            user.ack = ack  # type: ignore[method-assign]
            bound.append("ack")
    return bound


def _bind_spout_fast_paths(user: Any, emitter: Emitter, rel: Reliability) -> list[str]:
    """A spout's emit with a message id, two calls fewer; and its batch emits when it declares
    ``heron_emit_tracked_many`` or ``heron_emit_tracked_run``. Returns the attributes it set."""
    em, emit_root, new_root, emitted = emitter.emit, emitter.emit_root, rel.draw_root, rel.emitted

    def spout_emit(tup: Sequence[Any], tup_id: Any = None, stream: str = "default",
                   direct_task: int | None = None, need_task_ids: bool = False) -> list[int] | None:
        if tup_id is None:
            return em(tup, stream, direct_task, need_task_ids)
        root = new_root()
        sent, xor = emit_root(tup, stream, direct_task, need_task_ids, root)
        emitted(root, tup_id, xor)
        return sent

    user.emit = emitter.spout_tracked_emit(spout_emit, new_root, emitted) or spout_emit
    bound = ["emit"]
    if hasattr(type(user), "heron_emit_tracked_many"):
        emit_root_many, emitted_many = emitter.emit_root_many, rel.emitted_many

        def emit_tracked_many(rows: Sequence[Sequence[Any]], tup_ids: Sequence[Any], stream: str = "default") -> None:
            # each row with the message id of the same index: emit(row, tup_id=...) per row
            roots = [new_root() for _ in tup_ids]
            emitted_many(roots, tup_ids, emit_root_many(rows, stream, roots))

        user.heron_emit_tracked_many = emit_tracked_many
        bound.append("heron_emit_tracked_many")
    if hasattr(type(user), "heron_emit_tracked_run"):
        emit_root_run, emitted_run = emitter.emit_root_run, rel.emitted_run

        def emit_tracked_run(rows: Sequence[Sequence[Any]], tup_id: Any, stream: str = "default") -> None:
            # every row under one root and one message id: one ack or fail for the run
            root = new_root()
            emitted_run(root, tup_id, emit_root_run(rows, stream, root), len(rows))

        user.heron_emit_tracked_run = emit_tracked_run
        bound.append("heron_emit_tracked_run")
    return bound
