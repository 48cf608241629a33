"""A shell component's conversation, on the task's execution thread: start and handshake,
then commands from the subprocess turned into the component's emits, acks, fails, logs and
metric updates. BoltDriver streams (tuples out, commands back, both at once); SpoutDriver
asks one command at a time and applies commands until the sync (Storm's ShellSpout).

Every failure raises ShellError (the subprocess killed, its stderr tail in the message) and
the driver stays dead: the task's thread then ends and the task is restarted like any task
whose user code raised.
"""

from __future__ import annotations

import logging
import queue
import tempfile
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from heron_py.multilang import messages as m
from heron_py.multilang import scripts
from heron_py.multilang.codec import encode
from heron_py.multilang.errors import ProtocolError, ShellError
from heron_py.multilang.process import Closed, ShellProcess
from heron_py.multilang.session import Session, State
from heron_py.multilang.setup import ShellConfig, handshake_conf, handshake_context

if TYPE_CHECKING:  # annotations only: multilang is below the API it serves (api/shell.py)
    from heron_py.api.topology_context import TopologyContext

# while process() waits for room in the writer's queue it applies commands this often
BLOCKED_POLL_S = 0.01


def update_metric(context: TopologyContext, name: str, params: Any) -> None:
    """Storm's IShellMetric.updateMetricFromRPC on a metric registered under ``name``."""
    entry = context.registered_metrics.get(name)
    if entry is None:
        raise ProtocolError(f"multilang: metrics update of '{name}', which is not registered; expected one of "
                            f"{sorted(context.registered_metrics)} (register it in initialize())")
    metric: Any = entry[0]  # duck-typed: heronpy's metric classes share no update interface
    rpc = getattr(metric, "update_metric_from_rpc", None)
    if callable(rpc):
        rpc(params)
    elif hasattr(metric, "incr") and not hasattr(metric, "add_key"):
        metric.incr(1 if params is None else params)  # CountMetric: Storm's CountShellMetric
    elif hasattr(metric, "add_key") and isinstance(params, list) and len(params) == 2:
        (metric.incr if hasattr(metric, "incr") else metric.update)(*params)  # a Multi* metric: [key, value]
    elif hasattr(metric, "update") and not hasattr(metric, "add_key"):
        metric.update(params)  # reduced and assignable metrics
    else:
        raise ProtocolError(f"multilang: metrics update of '{name}' with params {params!r}; a "
                            f"{type(metric).__name__} takes [key, value]")


WAKE_KEY = "heron_py.shell.wake"


class Driver(ABC):
    """What both kinds share: the process, the session, logging and failing."""

    def __init__(self, user: Any, conf: dict[str, Any], context: TopologyContext, *, writer: bool,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.user = user
        self.context = context
        self.where = f"shell component '{context.get_component_id()}' task {context.get_task_id()}"
        self.config = ShellConfig.from_conf(conf, self.where)
        self.log: logging.Logger = user.logger
        self.session = Session(self.config.timeout_s, clock)
        self.error: ShellError | None = None
        # the subprocess writes an empty file named after its pid here (Storm's pidDir)
        self._pid_dir = tempfile.TemporaryDirectory(prefix="heron-shell-pids-")
        cfg = self.config
        # heron-py's storm.py / storm.js where the project has none (a Storm jar brings Storm's)
        env = scripts.prepare(cfg.command, cfg.cwd, self.log, self.where)
        self.proc = ShellProcess(cfg.command, cfg.cwd, cfg.serializer, cfg.max_bytes, self.log, self.where,
                                 cfg.max_pending, env)
        self._wake_sent = False
        wake = getattr(user, "heron_wake", None)
        # off only to measure what the wake saves (bench/multilang_bench.py)
        if wake is not None and str(conf.get(WAKE_KEY, True)).lower() != "false":
            self.proc.on_input = lambda: self._on_input(wake)
        try:
            self._handshake(conf)
        except ShellError as e:
            self.error = e
            raise
        if writer:
            self.proc.start_writer()
        self.log.info("%s: launched %s in %s, pid %d (%s)", self.where, cfg.command, cfg.cwd,
                      self.session.pid or -1, cfg.serializer)

    def _on_input(self, wake: Callable[[], None]) -> None:
        """Reader thread: one wake until the task thread polls (a storm.py emit waits for its
        task ids; without the wake it would wait for the next poll tick)."""
        if not self._wake_sent:
            self._wake_sent = True
            wake()

    def encode(self, msg: m.Message) -> bytes:
        return encode(m.to_wire(msg), self.config.serializer)

    def _handshake(self, conf: dict[str, Any]) -> None:
        setup = m.Setup(handshake_conf(conf, self.context.get_topology_name()), self._pid_dir.name,
                        handshake_context(self.context))
        self.proc.write_now(self.encode(setup))
        value = self.next_value(self.session.remaining_s(), "its pid (the handshake's reply)")
        try:
            self.session.started(m.parse_pid(value).pid)
        except ProtocolError as e:
            raise self.fail(str(e)) from None

    def next_value(self, timeout_s: float | None, waiting_for: str) -> Any:
        """The next decoded value; raises ShellError when the output ended or after
        ``timeout_s`` of silence; ``queue.Empty`` when ``timeout_s`` is None and nothing is there."""
        try:
            value = self.proc.inbox.get_nowait() if timeout_s is None else self.proc.inbox.get(timeout=timeout_s)
        except queue.Empty:
            if timeout_s is None:
                raise
            raise self.fail(f"heartbeat timeout: nothing heard for {self.config.timeout_s:g} s while waiting for "
                            f"{waiting_for} (topology.subprocess.timeout.secs)") from None
        if isinstance(value, Closed):
            raise self.fail(value.reason)
        self.session.heard()
        return value

    def fail(self, reason: str) -> ShellError:
        """Kills the subprocess; the error to raise (kept: later calls raise it again)."""
        if self.error is None:
            self.session.dead()
            self.error = ShellError(self.proc.failure(reason))
            self.log.error("%s", self.error)
        return self.error

    def check(self) -> None:
        if self.error is not None:
            raise self.error

    def apply_value(self, value: Any) -> None:
        """One decoded value as a command; anything it raises kills the subprocess too."""
        try:
            self.apply(m.parse_command(value))
        except ShellError:
            raise
        except ProtocolError as e:
            raise self.fail(str(e)) from None
        except Exception as e:  # the component's emit refused it (wrong fields, unknown stream, ...)
            raise self.fail(f"applying {m.parse_command(value)} raised {type(e).__name__}: {e}") from e

    @abstractmethod
    def apply(self, cmd: m.Command) -> None:
        """One command of the subprocess, on the task's thread (bolt and spout differ)."""

    def apply_common(self, cmd: m.Command) -> bool:
        """log, error and metrics, the same for both kinds; False for anything else."""
        if isinstance(cmd, m.Log):
            self.log.log(cmd.python_level, "ShellLog pid:%d %s", self.session.pid or -1, cmd.msg)
        elif isinstance(cmd, m.Error):
            # Storm reports it (collector.reportError) and carries on
            self.log.error("%s: the subprocess reported an error: %s", self.where, cmd.msg)
        elif isinstance(cmd, m.Metrics):
            update_metric(self.context, cmd.name, cmd.params)
        else:
            return False
        return True

    def close(self) -> None:
        if self.error is None:
            self.session.dead()
            self.proc.close()
        self._pid_dir.cleanup()


class BoltDriver(Driver):
    def __init__(self, user: Any, conf: dict[str, Any], context: TopologyContext,
                 clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(user, conf, context, writer=True, clock=clock)

    def send(self, tup: Any, make: Callable[[str], m.BoltTuple]) -> None:
        """Hands ``tup`` to the writer; while its queue is full, applies commands (the
        subprocess may be waiting for task ids only we can send)."""
        self.check()
        data = self.encode(make(self.session.input_sent(tup)))
        while not self.proc.offer(data, BLOCKED_POLL_S):
            self.poll()
        self.apply_all()

    def poll(self) -> None:
        """Applies what came in; sends the heartbeat when due; dies on a heartbeat timeout."""
        self._wake_sent = False  # before draining: input after this wakes the task thread again
        self.check()
        self.apply_all()
        hb = self.session.heartbeat_due(unwritten=self.proc.unwritten())
        if hb is not None:
            self.proc.offer_urgent(self.encode(m.heartbeat(hb)))
        if self.session.timed_out():
            raise self.fail(f"heartbeat timeout: nothing heard for more than {self.config.timeout_s:g} s "
                            f"(topology.subprocess.timeout.secs)")

    def busy(self) -> bool:
        """True until the subprocess answered a heartbeat sent after the last tuple (then a
        sequential adapter has processed every tuple) and its commands are applied."""
        self.poll()
        if self.session.settled and self.proc.inbox.empty():
            return False
        if self.proc.unwritten():
            return True  # the settling heartbeat goes once every tuple is in the pipe
        hb = self.session.heartbeat_due(force=True)
        if hb is not None:
            self.proc.offer_urgent(self.encode(m.heartbeat(hb)))
        return True

    def apply_all(self) -> None:
        while self.error is None:
            try:
                value = self.next_value(None, "commands")
            except queue.Empty:
                return
            self.apply_value(value)

    def apply(self, cmd: m.Command) -> None:
        s, user = self.session, self.user
        if isinstance(cmd, m.Emit):
            anchors = [s.anchor(a) for a in cmd.anchors]
            tasks = user.emit(cmd.values, cmd.stream, anchors, cmd.task, True)
            if cmd.wants_task_ids:
                # written now, from this thread: the subprocess waits for them (storm.py asks after
                # every emit), and a hand-off to the writer thread would add a thread switch
                self.proc.write_now(self.encode(m.TaskIds(list(tasks or []))))
        elif isinstance(cmd, m.Ack):
            user.ack(s.take_input(cmd.id, "ack"))
        elif isinstance(cmd, m.Fail):
            user.fail(s.take_input(cmd.id, "fail"))
        elif isinstance(cmd, m.Sync):
            s.synced()
        else:
            self.apply_common(cmd)


class SpoutDriver(Driver):
    def __init__(self, user: Any, conf: dict[str, Any], context: TopologyContext,
                 clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(user, conf, context, writer=False, clock=clock)

    def call(self, command: str, msg_id: Any = "") -> None:
        """Sends ``command`` and applies the subprocess's commands until its sync."""
        self.check()
        s = self.session
        s.command_sent(command)
        self.proc.write_now(self.encode(m.SpoutCommand(command, msg_id)))
        while s.state is State.WAITING:
            self.apply_value(self.next_value(s.remaining_s(), f"the sync after '{command}'"))

    def check_alive(self) -> None:
        self.check()
        code = self.proc.proc.poll()
        if code is not None:
            raise self.fail(f"the subprocess exited with code {code} between commands")

    def apply(self, cmd: m.Command) -> None:
        if isinstance(cmd, m.Emit):
            if cmd.anchors:
                raise ProtocolError(f"multilang: a spout's emit has anchors {list(cmd.anchors)}; a spout emits "
                                    f"with an 'id', not anchors")
            tasks = self.user.emit(cmd.values, tup_id=cmd.id, stream=cmd.stream, direct_task=cmd.task,
                                   need_task_ids=True)
            if cmd.wants_task_ids:
                self.proc.write_now(self.encode(m.TaskIds(list(tasks or []))))
        elif isinstance(cmd, m.Sync):
            self.session.synced()
        elif isinstance(cmd, (m.Ack, m.Fail)):
            raise ProtocolError(f"multilang: a spout sent '{'ack' if isinstance(cmd, m.Ack) else 'fail'}'; "
                                f"expected emit, log, error, metrics or sync")
        else:
            self.apply_common(cmd)

