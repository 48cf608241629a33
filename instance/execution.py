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
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from heron_py.checkpoint.storage import LocalFsStorage, checkpoint_root
from heron_py.common.config import InstanceConfig, StatefulConfig, effectively_once
from heron_py.common.package import load_main
from heron_py.planner.model import PhysicalPlan
from heron_py.runtime.host import BoltHost, ComponentHost, HostOptions, SpoutHost, jsonl_observer, make_host
from heron_py.runtime.stateful import Phase, StatefulTask
from heron_py.state.localfs import heron_home
from instance.metrics import TaskReports
from instance.queues import InItem, InKind, Outbox, QueueBytes

# a spout calls next_tuple at most this often between looks at its inbound queue
SPOUT_CALLS = 64
# a bolt takes at most this many more queued batches before it looks at the clock again
BOLT_BATCHES = 8


def set_gc_threshold(cfg: InstanceConfig) -> None:
    """The task's generation-0 collection threshold (heron_py.instance.gc.threshold), set before
    the user's code runs. The older generations keep theirs: they count collections of the
    younger ones, not allocations."""
    _, gen1, gen2 = gc.get_threshold()
    gc.set_threshold(cfg.gc_threshold, gen1, gen2)


class TaskRunner:
    """The execution thread's main: plan, package, host, loop."""

    def __init__(self, *, task_id: int, component: str, package_dir: Path, inbound: queue.Queue[InItem],
                 in_bytes: QueueBytes, outbox: Outbox, reports: TaskReports, mark_ready: Callable[[], None],
                 log: logging.Logger, topology: str = "", checkpoint_root: Path | None = None,
                 secret: bytes | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.task_id = task_id
        self.topology = topology
        self._checkpoint_root = checkpoint_root
        self._secret = secret  # checkpoint files are signed and checked under it
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

    def stop(self) -> None:
        self.stopping = True
        self.outbox.stopping = True

    def _wait_for_plan(self) -> PhysicalPlan | None:
        while not self.stopping:
            try:
                kind, payload = self._in.get(timeout=0.2)
            except queue.Empty:
                continue
            if kind is InKind.PPLAN:
                return PhysicalPlan.from_dict(json.loads(payload))
            self._log.warning("dropping a %s item that arrived before the physical plan", kind.value)
        return None

    def run(self) -> int:
        plan = self._wait_for_plan()
        if plan is None:
            return 0
        load_main(self._package_dir)
        host = make_host(plan, self.task_id, self.outbox.send, HostOptions(clock=self._clock, wake=self._wake))
        set_gc_threshold(host.config)
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
        # the executor passes the folder; the same default as the master's otherwise
        root = self._checkpoint_root or checkpoint_root(heron_home(), cfg.root)
        storage = LocalFsStorage(root, secret=self._secret)
        rt = self.stateful = StatefulTask(host, storage, self.topology or host.plan.topology.name,
                                          self.outbox.send, align_bytes=cfg.align_bytes, log=self._log,
                                          clock=self._clock)
        self.reports.stateful = rt
        # ready before user code runs: the master restores a topology once every task is there
        self._mark_ready()
        self._log.info("%s %s task %d waiting for its restore (effectively once, checkpoints in %s)", kind,
                       self.component, self.task_id, root)
        while rt.phase is Phase.WAITING_RESTORE and not self.stopping:
            try:
                kind_, payload = self._in.get(timeout=0.2)
            except queue.Empty:
                continue
            if kind_ is InKind.PPLAN:
                plan = PhysicalPlan.from_dict(json.loads(payload))
                if plan.version >= host.plan.version:
                    host.plan = plan  # activation waits for start(): no user code before the restore
            elif kind_ is InKind.RESTORE:
                rt.restore(*payload)
            else:
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

    def _wake(self) -> None:
        """Called from a component's own thread; a full queue means the task thread is busy
        and will poll anyway."""
        try:
            self._in.put_nowait((InKind.WAKE, None))
        except queue.Full:
            pass

    def on_item(self, host: ComponentHost, kind: InKind, payload: Any) -> None:
        """Any inbound item other than a bolt's batch (the bolt loop handles those inline)."""
        if kind is InKind.WAKE:
            host.poll()
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

    def drain(self, host: ComponentHost, block_s: float) -> None:
        """Handles what is queued, waiting up to ``block_s`` for the first item."""
        get = self._in.get
        try:
            kind, payload = get(timeout=block_s) if block_s > 0 else self._in.get_nowait()
        except queue.Empty:
            return
        while True:
            self.on_item(host, kind, payload)
            try:
                kind, payload = self._in.get_nowait()
            except queue.Empty:
                return


_CHECKPOINT_ITEMS = frozenset((InKind.MARKER, InKind.CKPT_START, InKind.RESTORE, InKind.START))


class SpoutLoop:
    def __init__(self, runner: TaskRunner, host: SpoutHost) -> None:
        self.runner = runner
        self.host = host
        self.clock = runner._clock
        self.interval = host.config.flush_interval_s
        self.last_flush = self.clock()

    def run(self) -> None:
        runner, host, clock = self.runner, self.host, self.clock
        outbox = runner.outbox
        host.start()
        next_check = next_user = clock()
        poll_s = host.poll_s
        while not runner.stopping:
            runner.drain(host, block_s=0.0 if host.active else min(0.05, poll_s or 0.05))
            if poll_s is not None:
                host.poll()
            now = clock()
            if now >= next_user:
                next_user = now + 0.5
                host.collect_user_metrics(now)
            host.acks_due()
            if now >= next_check:
                next_check = now + 1.0
                host.expire()
                if host.reliability is not None:
                    host.metrics.log_if_changed(runner._log, host.reliability)
            if outbox.held and not outbox.push_held():
                # the outbound queue is full (backpressure): no next_tuple until it drains
                t0 = clock()
                runner.drain(host, block_s=0.001)
                outbox.time_blocked_s += clock() - t0
                continue
            if host.active and (runner.stateful is None or runner.stateful.processing):
                self._produce()
            else:
                host.flush()
        host.close()

    def _produce(self) -> None:
        host, runner = self.host, self.runner
        if host.room() <= 0:
            # topology.max.spout.pending reached: wait for acks, do not call next_tuple
            host.flush()
            self.last_flush = self.clock()
            runner.drain(host, block_s=0.001)
            return
        emitted = host.next_tuples(SPOUT_CALLS, self.interval)
        now = self.clock()
        if not emitted:
            # nothing to emit: flush what we have and wait a little (Storm's 1 ms sleep)
            host.flush()
            self.last_flush = now
            runner.drain(host, block_s=0.001)
        elif now - self.last_flush >= self.interval:
            host.flush()
            self.last_flush = now


class BoltLoop:
    def __init__(self, runner: TaskRunner, host: BoltHost) -> None:
        self.runner = runner
        self.host = host
        self.clock = runner._clock
        tick = host.tick_s
        self.tick = tick or 0.0
        self.next_tick = self.clock() + tick if tick else float("inf")
        self.last_flush = self.clock()

    def _take(self, wait: float) -> None:
        """Takes one inbound item (waiting up to ``wait``), then what else is queued, at most
        BOLT_BATCHES more, before the loop looks at the clock again."""
        q, runner, host = self.runner._in, self.runner, self.host
        in_bytes = runner.in_bytes
        process = host.process_frame if runner.stateful is None else runner.stateful.on_batch
        try:
            item = q.get(timeout=wait) if wait > 0 else q.get_nowait()
        except queue.Empty:
            return
        for more in range(BOLT_BATCHES, -1, -1):
            kind, payload = item
            if kind is InKind.BATCH:
                in_bytes.taken += len(payload)  # the gateway counts what it put
                process(payload)
            else:
                runner.on_item(host, kind, payload)
            if not more:
                return
            try:
                item = q.get_nowait()
            except queue.Empty:
                return

    def run(self) -> None:
        runner, host, clock = self.runner, self.host, self.clock
        host.start()
        interval = host.config.flush_interval_s
        idle_flush = host.config.flush_when_idle
        next_metrics = clock() + 10.0
        next_user = clock()
        inbound = runner._in
        poll_s = host.poll_s
        while not runner.stopping:
            now = clock()
            if host.has_pending:
                wait = max(0.0, min(self.last_flush + interval, self.next_tick) - now)
            else:
                wait = max(0.0, min(self.next_tick - now, 0.1))
            if poll_s is not None:
                wait = min(wait, poll_s)
            self._take(wait)
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
        host.close()
