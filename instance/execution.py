"""The execution thread: runs the user's spout or bolt through a component host
(heron_py/runtime/host.py) and never touches a socket.

It waits for the first physical plan, loads the topology package, builds the host, calls
``initialize`` and then loops: a spout calls ``next_tuple`` while the topology is active and
the outbound queue has room; a bolt takes batches from the inbound queue and hands them to
the host, with ``process_tick`` on the tick interval. Emitted tuples are batched per
destination task by the host's emitter and flushed when a batch is full or
``flush_interval_s`` has passed.
"""

from __future__ import annotations

import gc
import json
import logging
import queue
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO, Any

from heron_py.checkpoint.select import checkpoint_location, open_checkpoint_storage
from heron_py.common.config import SHUTDOWN_DRAIN, ConfigError, InstanceConfig, StatefulConfig, effectively_once
from heron_py.common.framing import batch_count
from heron_py.common.host import heron_home
from heron_py.common.package import load_main
from heron_py.planner.model import PhysicalPlan, has_task
from heron_py.runtime.host import BoltHost, ComponentHost, HostOptions, SpoutHost, jsonl_observer, make_host
from heron_py.runtime.stateful import Phase, StatefulTask
from instance.metrics import TaskReports
from instance.queues import InItem, InKind, Outbox, QueueBytes

# a spout calls next_tuple at most this often between looks at its inbound queue
SPOUT_CALLS = 64
# a bolt takes at most this many more queued batches before it looks at the clock again
BOLT_BATCHES = 8
# A spout whose next_tuple emits nothing waits before calling it again, on its inbound queue
# (an ack, a plan or a wake ends the wait at once): 1 ms at first, as Storm's sleep strategy,
# doubling while next_tuple stays empty, up to IDLE_WAIT_MAX_S (Storm 2's progressive wait).
# An idle spout so wakes ~20 times a second, not 1000. A spout that waits on a source of its
# own in next_tuple says so (heron_waited, SpoutHost.waited_for_input) and gets no idle wait:
# the loop's wait would add up to IDLE_WAIT_MAX_S to a record arriving in a quiet spell.
IDLE_WAIT_MIN_S = 0.001
IDLE_WAIT_MAX_S = 0.05
# the longest the execution thread sleeps on its inbound queue: a SIGTERM's handler only sets
# a flag (it cannot safely touch a queue's lock), so the loop looks at the flag this often
STOP_CHECK_S = 0.25
# spout timers: user metrics every USER_METRICS_S, pending tuples' expiry every EXPIRE_S
USER_METRICS_S = 0.5
EXPIRE_S = 1.0

# heron_py.instance.shutdown.drain.secs (the config table): the time from a SIGTERM (or the
# task's end) within which the component is closed and the outbound queue is sent to the stream
# manager; what is not sent by then is counted in __dropped-tuples/shutdown. Below the
# executor's 5 s grace before SIGKILL, so the count and the last metrics report get out.


def shutdown_drain_secs(config: Mapping[str, Any], task_id: int, component: str) -> float:
    """The task's drain time from its topology's config; one error line naming the task."""
    try:
        secs: float = SHUTDOWN_DRAIN.parse(config)
    except ConfigError as e:
        raise ConfigError(f"task {task_id} ({component}): {e}") from None
    return secs


def set_gc_threshold(cfg: InstanceConfig) -> None:
    """The task's generation-0 collection threshold (heron_py.instance.gc.threshold), set before
    the user's code runs. The older generations keep theirs: they count collections of the
    younger ones, not allocations."""
    _, gen1, gen2 = gc.get_threshold()
    gc.set_threshold(cfg.gc_threshold, gen1, gen2)


def set_switch_interval(cfg: InstanceConfig) -> None:
    """The process's GIL switch interval (heron_py.instance.switch.interval.ms): a frame the
    gateway thread reads while the execution thread runs the user's code waits at most this long
    for the GIL, on each hop (CPython's 5 ms is tuned for throughput of CPU-bound threads)."""
    sys.setswitchinterval(cfg.switch_interval_s)


class TaskRunner:
    """The execution thread's main: plan, package, host, loop."""

    def __init__(self, *, task_id: int, component: str, package_dir: Path, inbound: queue.Queue[InItem],
                 in_bytes: QueueBytes, outbox: Outbox, reports: TaskReports, mark_ready: Callable[[], None],
                 log: logging.Logger, topology: str = "", checkpoint_root: Path | None = None,
                 secret: bytes | None = None, max_frame: int | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.task_id = task_id
        self.topology = topology
        self._checkpoint_root = checkpoint_root
        self._secret = secret  # checkpoint files are signed and checked under it
        # the topology's frame limit, as the links have it (the executor's LinkConfig): the
        # emitter's batches keep under it; None (a runner made by hand): the plan's
        self._max_frame = max_frame
        self.stateful: StatefulTask | None = None  # effectively once only
        self.component = component
        self._package_dir = package_dir
        self._in = inbound
        self.in_bytes = in_bytes
        self.outbox = outbox
        self.reports = reports
        self._mark_ready = mark_ready
        self._log = log
        self._clock = clock
        self.stopping = False
        self.drain_s: float = SHUTDOWN_DRAIN.default  # the topology's, once its plan came
        self.wakeups = 0  # returns from a blocking wait on the inbound queue (tests count them)
        self.waited_s = 0.0  # the last drain's wait for its first item (the spout loop's time not at work)
        outbox.queue.on_room = self._room

    def stop(self) -> None:
        """SIGTERM's handler (on this thread, between two bytecodes of the loop): sets flags
        only. The loop ends within STOP_CHECK_S, closes the component, and the outbox drains
        until the deadline set here."""
        self.stopping = True
        self.outbox.begin_drain(self.drain_s)

    def _wait_for_plan(self) -> PhysicalPlan | None:
        """The first physical plan that holds this task. What comes before it is kept, in order,
        for after it, as Heron's instance keeps the tuples queued until it runs: the stream
        manager sends the plan first (stream_manager/main.py), so only a misordered sender's items
        come here. A plan without this task is skipped: a live rescale starts its new tasks
        before the plan that adds them, and their stream manager hands them the plan it has."""
        early: list[InItem] = []
        while not self.stopping:
            try:
                kind, payload = self._in.get(timeout=0.2)
            except queue.Empty:
                continue
            if kind is InKind.PPLAN:
                plan = PhysicalPlan.from_dict(json.loads(payload))
                if not has_task(plan, self.task_id):
                    self._log.info("task %d (%s) is not in physical plan v%d: a rescale started it ahead of "
                                   "its plan; waiting for the plan that adds it", self.task_id, self.component,
                                   plan.version)
                    continue
                if early:
                    self._log.warning("task %d: %d items arrived before the physical plan; handled after it",
                                      self.task_id, len(early))
                    self._requeue_first(early)
                return plan
            early.append((kind, payload))
        return None

    def _requeue_first(self, items: list[InItem]) -> None:
        """Puts ``items`` back at the front of the inbound queue, in their order, ahead of what
        the gateway queued since (under the queue's own lock, so nothing comes in between)."""
        q = self._in
        with q.mutex:
            q.queue.extendleft(reversed(items))  # queue.Queue keeps its items in this deque
            q.not_empty.notify()

    def run(self) -> int:
        # the user's module first: its import (a topology file that builds data at import takes
        # most of a task's start) overlaps the gateway's registration and the plan's push
        load_main(self._package_dir)
        plan = self._wait_for_plan()
        if plan is None:
            return 0
        self.drain_s = shutdown_drain_secs(plan.topology.config, self.task_id, self.component)
        host = make_host(plan, self.task_id, self.outbox.send, HostOptions(clock=self._clock, wake=self._wake,
                                                                             max_frame=self._max_frame))
        set_gc_threshold(host.config)
        set_switch_interval(host.config)
        capture = self._open_capture(host.config)
        if capture is not None:
            host.observer = jsonl_observer(self.task_id, capture)
        try:
            self.outbox.hold = host.is_spout
            self.reports.host = host
            if not self._begin(host):
                return 0
            if isinstance(host, SpoutHost):
                SpoutLoop(self, host).run()
            else:
                assert isinstance(host, BoltHost)
                BoltLoop(self, host).run()
            self.close(host)
        finally:
            if capture is not None:
                capture.close()
        return 0

    def _begin(self, host: ComponentHost) -> bool:
        """initialize(), or in effectively-once mode the first restore (which calls init_state and
        then initialize); False when the task was stopped first."""
        kind = "spout" if host.is_spout else "bolt"
        if not effectively_once(host.plan.topology.config):
            host.initialize()
            self._log.info("%s %s task %d initialized", kind, self.component, self.task_id)
            self._mark_ready()
            return True
        cfg = StatefulConfig.from_config(host.plan.topology.config)
        # the executor passes the folder (unused with Redis); the same default as the master's otherwise
        storage = open_checkpoint_storage(cfg, heron_home(), secret=self._secret, root=self._checkpoint_root)
        where = checkpoint_location(cfg, heron_home(), self._checkpoint_root)
        rt = self.stateful = StatefulTask(host, storage, self.topology or host.plan.topology.name,
                                          self.outbox.send, align_bytes=cfg.align_bytes, log=self._log,
                                          clock=self._clock)
        self.reports.stateful = rt
        # ready before user code runs: the master restores a topology once every task is there
        self._mark_ready()
        self._log.info("%s %s task %d waiting for its restore (effectively once, checkpoints in %s)", kind,
                       self.component, self.task_id, where)
        while rt.phase is Phase.WAITING_RESTORE and not self.stopping:
            try:
                kind_, payload = self._in.get(timeout=0.2)
            except queue.Empty:
                continue
            if kind_ is InKind.PPLAN:
                plan = PhysicalPlan.from_dict(json.loads(payload))
                if not has_task(plan, self.task_id):
                    # the restore reads this task's place in host.plan: a plan without it (not
                    # expected here, where a rescale restarts every process) must not become it
                    self._log.info("task %d (%s) is not in physical plan v%d; kept plan v%d", self.task_id,
                                   self.component, plan.version, host.plan.version)
                elif plan.version >= host.plan.version:
                    host.plan = plan  # activation waits for start(): no user code before the restore
            elif kind_ is InKind.RESTORE:
                rt.restore(*payload)
            else:
                if kind_ is InKind.BATCH:
                    self.in_bytes.taken += len(payload)  # the gateway counted it in: out again
                self._log.info("task %d: dropping a %s item that arrived before its restore", self.task_id,
                               kind_.value)
        return not self.stopping

    def _open_capture(self, cfg: InstanceConfig) -> IO[str] | None:
        """Tests' capture of received tuples (heron_py.testing.local), one JSON line each."""
        if not cfg.capture_dir or self.component not in cfg.capture_components:
            return None
        path = Path(cfg.capture_dir) / f"{self.component}-{self.task_id}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        return path.open("a", encoding="utf-8")

    def close(self, host: ComponentHost) -> None:
        """The task's end, in heronpy's order: a spout still active is deactivated, then the
        component closes (a bolt's cleanup) and the emitter's last batches are flushed to the
        outbox. The drain to the stream manager follows (instance/main.py)."""
        self.outbox.begin_drain(self.drain_s)  # the task may end without a stop() (tests)
        if isinstance(host, SpoutHost) and host.active:
            host.user.deactivate()
            host.active = False
        host.close()
        host.flush()  # a spout's close() runs after the host's own flush: what it emits goes too
        self._log.info("task %d (%s) closed", self.task_id, self.component)

    def _wake(self) -> None:
        """Called from a component's own thread; a full queue means the task thread is busy
        and will poll anyway."""
        try:
            self._in.put_nowait((InKind.WAKE, None))
        except queue.Full:
            pass

    def _room(self) -> None:
        """The gateway took a flush while a spout waited for room (OutQueue.want_room): wake
        it through its inbound queue. On the gateway thread; a full queue wakes it anyway."""
        try:
            self._in.put_nowait((InKind.ROOM, None))
        except queue.Full:
            pass

    def on_item(self, host: ComponentHost, kind: InKind, payload: Any) -> None:
        """Any inbound item other than a bolt's batch (the bolt loop handles those inline)."""
        if kind is InKind.WAKE:
            host.poll()
        elif kind is InKind.ROOM:
            pass  # the loop pushes its held frames next
        elif kind is InKind.PPLAN:
            host.set_plan(PhysicalPlan.from_dict(json.loads(payload)))
        elif kind is InKind.ACKS and isinstance(host, SpoutHost):
            host.on_results(payload)
        elif self.stateful is not None and kind in _CHECKPOINT_ITEMS:
            self._on_checkpoint_item(kind, payload)
        else:
            self._log.warning("task %d got an unexpected %s item; dropped", self.task_id, kind.value)

    def _on_checkpoint_item(self, kind: InKind, payload: Any) -> None:
        rt = self.stateful
        assert rt is not None
        if kind is InKind.MARKER:
            rt.on_marker(payload)
        elif kind is InKind.CKPT_START:
            rt.start_checkpoint(payload)
        elif kind is InKind.RESTORE:
            rt.restore(*payload)
        elif kind is InKind.START and rt.start_processing(payload):
            self._log.info("task %d processing (restore %d done everywhere)", self.task_id, payload)
        elif kind is InKind.COMMITTED:
            rt.checkpoint_committed(payload)

    def drain(self, host: ComponentHost, block_s: float) -> bool:
        """Handles what is queued, waiting up to ``block_s`` (at most STOP_CHECK_S) for the
        first item on the queue's own condition; True when an item came. ``waited_s`` is
        that wait's length (0.0 without one): the items' handling after it is work."""
        self.waited_s = 0.0
        try:
            if block_s > 0:
                clock = self._clock
                t0 = clock()
                try:
                    kind, payload = self._in.get(timeout=min(block_s, STOP_CHECK_S))
                finally:
                    self.waited_s = clock() - t0
                    self.wakeups += 1
            else:
                kind, payload = self._in.get_nowait()
        except queue.Empty:
            return False
        while True:
            self.on_item(host, kind, payload)
            try:
                kind, payload = self._in.get_nowait()
            except queue.Empty:
                return True


_CHECKPOINT_ITEMS = frozenset((InKind.MARKER, InKind.CKPT_START, InKind.RESTORE, InKind.START, InKind.COMMITTED))


class SpoutLoop:
    """Calls next_tuple while the topology is active, there is room for more pending tuples
    and the outbound queue takes the output. Otherwise it sleeps on its inbound queue until
    an item (acks, a plan, ROOM from the gateway, a component's WAKE) or its next timer.

    Busy time (``__busy-time-ms``) is counted per loop turn from the clock read the turn
    makes anyway: the time since the last turn's, less that turn's waits on the inbound queue
    (measured by ``TaskRunner.drain``), a round of next_tuple that emitted nothing because
    the spout waited on its own source, and the time blocked on a full outbound queue. A turn
    that emits adds no clock read; a wait adds the drain's two."""

    def __init__(self, runner: TaskRunner, host: SpoutHost) -> None:
        self.runner = runner
        self.host = host
        self.clock = runner._clock
        self.counters = runner.reports.exec_counters()
        self.interval = host.config.flush_interval_s
        self.last_flush = self.clock()
        now = self.clock()
        self.next_check = self.next_user = now
        self.idle_wait = IDLE_WAIT_MIN_S

    def _until_timer(self, now: float) -> float:
        """Seconds to the next timer: expiry, user metrics, a component's heron_poll."""
        due = min(self.next_check, self.next_user) - now
        poll_s = self.host.poll_wait()
        return max(0.0, due if poll_s is None else min(due, poll_s))

    def _timers(self, now: float) -> None:
        host, runner = self.host, self.runner
        if now >= self.next_user:
            self.next_user = now + USER_METRICS_S
            host.collect_user_metrics(now)
        host.acks_due()
        if now >= self.next_check:
            self.next_check = now + EXPIRE_S
            host.expire()
            if host.reliability is not None:
                host.metrics.log_if_changed(runner._log, host.reliability)

    def run(self) -> None:
        runner, host, clock = self.runner, self.host, self.clock
        outbox, counters = runner.outbox, self.counters
        host.start()
        poll_s = host.poll_s
        # since the last turn's clock read: its time not at work (waits) and the time blocked
        turn, idle, blocked = clock(), 0.0, outbox.time_blocked_s
        while not runner.stopping:
            if host.active:
                runner.drain(host, block_s=0.0)
            else:  # deactivated: nothing to do until a plan (or a timer)
                host.flush()
                runner.drain(host, block_s=self._until_timer(clock()))
                idle += runner.waited_s
            if poll_s is not None:
                host.poll()
            now = clock()
            b = outbox.time_blocked_s
            counters.busy_s += now - turn - idle - (b - blocked)
            turn, idle, blocked = now, 0.0, b
            self._timers(now)
            if outbox.held and not self._push_held(now):
                continue
            if host.active and (runner.stateful is None or runner.stateful.processing):
                idle = self._produce(now)
            else:
                host.flush()
        counters.busy_s += clock() - turn - idle - (outbox.time_blocked_s - blocked)

    def _push_held(self, now: float) -> bool:
        """Backpressure: the outbound queue is full, so no next_tuple until the held frames
        went out. Sleeps until the gateway takes a flush (ROOM) or a timer (from ``now``, the
        turn's clock read); True when nothing is held any more."""
        runner, outbox = self.runner, self.runner.outbox
        outbox.queue.want_room()  # armed before the last look: a take in between still wakes us
        if outbox.push_held():
            return True
        runner.drain(self.host, block_s=self._until_timer(now))
        outbox.time_blocked_s += runner.waited_s  # the wait; handling what woke us is work
        return False

    def _produce(self, start: float) -> float:
        """A round of next_tuple, or a wait for room or input; returns the seconds of it not
        at work: its wait on the inbound queue, or, when the spout waited on its own source
        and emitted nothing, the round since ``start`` (the turn's clock read)."""
        host, runner = self.host, self.runner
        if host.room() <= 0:
            # topology.max.spout.pending reached: no next_tuple until acks (or expiry) free room
            host.flush()
            self.last_flush = self.clock()
            runner.drain(host, block_s=self._until_timer(self.last_flush))
            return runner.waited_s
        # an idle spout is probed with one next_tuple per wake-up, not a round of SPOUT_CALLS
        emitted = host.next_tuples(SPOUT_CALLS if self.idle_wait <= IDLE_WAIT_MIN_S else 1, self.interval)
        now = self.clock()
        if not emitted:
            # nothing to emit: flush what we have, then wait (progressively longer) for input
            host.flush()
            self.last_flush = now
            if host.waited_for_input():
                # the spout waited on its source itself (and wakes at its first record)
                self.idle_wait = IDLE_WAIT_MIN_S
                return now - start
            if runner.drain(host, block_s=min(self.idle_wait, self._until_timer(now))):
                self.idle_wait = IDLE_WAIT_MIN_S
            else:
                self.idle_wait = min(self.idle_wait * 2, IDLE_WAIT_MAX_S)
            return runner.waited_s
        self.idle_wait = IDLE_WAIT_MIN_S
        if now - self.last_flush >= self.interval:
            host.flush()
            self.last_flush = now
        return 0.0


class BoltLoop:
    """Takes batches from the inbound queue and hands them to the host, with ticks and flushes.

    Busy time (``__busy-time-ms``) is counted per loop turn from the clock read the turn
    makes anyway: the time since the end of the last turn's wait for input, less the time a
    flush was blocked on a full outbound queue. The wait's end costs a clock read only when
    the queue was empty (the loop may sleep); under load a turn adds none."""

    def __init__(self, runner: TaskRunner, host: BoltHost) -> None:
        self.runner = runner
        self.host = host
        self.clock = runner._clock
        self.counters = runner.reports.exec_counters()
        tick = host.tick_s
        self.tick = tick or 0.0
        self.next_tick = self.clock() + tick if tick else float("inf")
        self.last_flush = self.clock()

    def _take(self, wait: float, now: float) -> float:
        """Takes one inbound item (waiting up to ``wait`` when none is queued), then what else
        is queued, at most BOLT_BATCHES more, before the loop looks at the clock again. Returns
        when the work began: the clock once the wait ended, or ``now`` without a wait."""
        q, runner, host = self.runner._in, self.runner, self.host
        in_bytes = runner.in_bytes
        process = host.process_frame if runner.stateful is None else runner.stateful.on_batch
        if wait > 0 and not q.queue:  # only this thread takes: a queued item means no wait
            counters = self.counters
            counters.turn_from = 0.0  # waiting: not at work
            try:
                item = q.get(timeout=wait)
            except queue.Empty:
                return self.clock()
            now = counters.turn_from = self.clock()
        else:
            try:
                item = q.get_nowait()
            except queue.Empty:
                return now
        for more in range(BOLT_BATCHES, -1, -1):
            kind, payload = item
            if kind is InKind.BATCH:
                in_bytes.taken += len(payload)  # the gateway counts what it put
                process(payload)
            else:
                runner.on_item(host, kind, payload)
            if not more:
                return now
            try:
                item = q.get_nowait()
            except queue.Empty:
                return now
        return now

    def run(self) -> None:
        runner, host, clock = self.runner, self.host, self.clock
        outbox, counters = runner.outbox, self.counters
        host.start()
        interval = host.config.flush_interval_s
        idle_flush = host.config.flush_when_idle
        next_metrics = clock() + 10.0
        next_user = clock()
        inbound = runner._in
        poll_s = host.poll_s
        # where the last turn's work began, and the time blocked until then
        work_from, blocked = clock(), outbox.time_blocked_s
        counters.clock = clock
        while not runner.stopping:
            now = clock()
            b = outbox.time_blocked_s
            counters.turn_from, counters.turn_blocked = now, b  # a report counts the turn from here
            counters.busy_s += now - work_from - (b - blocked)
            blocked = b
            if host.has_pending:
                wait = max(0.0, min(self.last_flush + interval, self.next_tick) - now)
            else:
                wait = max(0.0, min(self.next_tick - now, 0.1))
            # a polled component's interval while busy, its idle one while not (no call without polling)
            poll_wait = host.poll_wait() if poll_s is not None else None
            if poll_wait is not None:
                wait = min(wait, poll_wait)
            work_from = self._take(wait, now)
            if poll_s is not None:
                host.poll()
            now = clock()
            if now >= self.next_tick and (runner.stateful is None or runner.stateful.processing):
                # effectively once: no tick before every task restored (a bolt emits nothing
                # of its own that the old run's in-flight frames could overtake)
                host.tick()
                self.next_tick = now + self.tick
            # flush when the batch interval is up, or at once when no input is waiting (more
            # batching would only add latency then; under load the queue is rarely empty)
            if host.has_pending and (now - self.last_flush >= interval or (idle_flush and inbound.empty())):
                host.flush()
                self.last_flush = now
            elif not host.has_pending:
                self.last_flush = now
            if now >= next_user:
                next_user = now + 0.5
                host.collect_user_metrics(now)
            if now >= next_metrics:
                next_metrics = now + 10.0
                host.metrics.log_if_changed(runner._log, None)
        counters.busy_s += clock() - work_from - (outbox.time_blocked_s - blocked)
        counters.turn_from = 0.0
        if host.removed:
            self.finish_input(clock() + runner.drain_s)

    def finish_input(self, deadline: float) -> None:
        """A task a live rescale removed is stopped once the plan without it is in effect; what
        it received before the switch is still in its queue (a backlog the drain did not wait
        out): it is processed, within the stop's drain time, rather than lost at the exit."""
        left, q, runner = 0, self.runner._in, self.runner
        while self.clock() < deadline:
            try:
                item = q.get_nowait()
            except queue.Empty:
                break
            left += 1
            self._handle(item)
        if left:
            runner._log.info("task %d: processed %d batches left in its queue after a rescale removed it",
                             runner.task_id, left)
        dropped = 0
        while True:  # the stop's drain time is over: what is still queued is counted, not lost unseen
            try:
                kind, payload = q.get_nowait()
            except queue.Empty:
                break
            if kind is InKind.BATCH:
                dropped += batch_count(payload)
        if dropped:
            runner.outbox.dropped_tuples += dropped  # __dropped-tuples/shutdown
            runner._log.warning("task %d: %d tuples left in its queue at its stop after a rescale removed it were "
                                "not processed within %g s; dropped (__dropped-tuples/shutdown)",
                                runner.task_id, dropped, runner.drain_s)

    def _handle(self, item: InItem) -> None:
        kind, payload = item
        runner, host = self.runner, self.host
        if kind is InKind.BATCH:
            runner.in_bytes.taken += len(payload)
            host.process_frame(payload)
        else:
            runner.on_item(host, kind, payload)
