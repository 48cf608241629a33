"""What the connector tests share: a component host for one task (``Context``, a ``Delegate``
recording emits, acks, fails and log lines, ``make`` to build and initialize a spout or bolt on
an injected ``Clock``, ``tup`` for an input tuple), used by the RabbitMQ, Redis and PostgreSQL
unit tests; and what the connectors' integration tests read of a local topology (``task_logs``,
``task_pid``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from heron_py.api.stream import Stream
from heron_py.api.tuple import HeronTuple
from heron_py.common.container_layout import TopologyPaths
from heron_py.state import LocalFsStateManager
from heron_py.testing import ManualClock


def Clock() -> ManualClock:
    """The connectors' tests start their clock at 1000 s."""
    return ManualClock(1000.0)


class _Comp:
    def __init__(self, fields: list[str]) -> None:
        self.fields = fields

    def output(self, stream: str) -> Any:
        return Stream(self.fields) if stream == "default" else None


class _Topology:
    def __init__(self, inputs: dict[str, list[str]]) -> None:
        self.inputs = inputs

    def component(self, name: str) -> Any:
        return _Comp(self.inputs[name]) if name in self.inputs else None


class Context:
    """The topology context a task sees: its component id and task id, the output fields of the
    components it reads (``inputs``), and the metrics it registers."""

    def __init__(self, comp: str = "c", task: int = 3, inputs: dict[str, list[str]] | None = None) -> None:
        self.comp, self.task = comp, task
        self.topology = _Topology(inputs or {})
        self.metrics: dict[str, Any] = {}

    def get_component_id(self) -> str:
        return self.comp

    def get_task_id(self) -> int:
        return self.task

    def get_component_tasks(self, comp: str) -> list[int]:
        return [self.task]

    def get_topology_name(self) -> str:
        return "t"

    def register_metric(self, name: str, metric: Any, interval: int) -> None:
        self.metrics[name] = metric


class Delegate:
    """What the task's host records for the test: emits, acks, fails, log lines."""

    def __init__(self) -> None:
        self.emitted: list[tuple[list[Any], Any]] = []
        self.acked: list[Any] = []
        self.failed: list[Any] = []
        self.lines: list[tuple[str, Any]] = []

    def emit(self, tup: Any, stream: Any, anchors: Any, direct_task: Any, need: Any, tup_id: Any) -> None:
        self.emitted.append((list(tup), tup_id))

    def ack(self, tup: Any) -> None:
        self.acked.append(tup)

    def fail(self, tup: Any) -> None:
        self.failed.append(tup)

    def log(self, message: str, level: Any = None) -> None:
        self.lines.append((message, level))

    @property
    def logger(self) -> Any:
        import logging
        return logging.getLogger("test")


def make(cls: Any, conf: dict[str, Any], clock: Clock, ctx: Context) -> tuple[Any, Delegate]:
    """A component of ``cls`` initialized at least once (ATLEAST_ONCE unless ``conf`` says)."""
    d = Delegate()
    c = cls(d)
    c.clock = clock
    c.initialize({"topology.reliability.mode": "ATLEAST_ONCE", **conf}, ctx)
    return c, d


def tup(i: int, values: list[Any], comp: str = "src") -> HeronTuple:
    return HeronTuple(id=str(i), component=comp, stream="default", task=1, values=values)


def task_logs(home: Path, name: str, pattern: str) -> str:
    """The text of the topology's log files matching ``pattern`` (a glob)."""
    return "".join(f.read_text() for f in TopologyPaths.of(name, home).logs.glob(pattern))


def task_pids(home: Path, name: str, component: str) -> dict[int, int]:
    """Task id → pid of each running task of ``component``, as the master last recorded them."""
    es = LocalFsStateManager(home).get_execution_state(name)
    if es is None:
        raise AssertionError(f"no execution state of topology {name}")
    return {int(t): int(info["pid"]) for t, info in es["instances"].items()
            if info["component"] == component and info.get("pid")}


def task_pid(home: Path, name: str, component: str) -> int:
    """The pid of the first running task of ``component`` (to kill -9 it mid-run)."""
    pids = task_pids(home, name, component)
    if not pids:
        raise AssertionError(f"no {component} task")
    return pids[min(pids)]


def ack_all_until(s: Any, d: Delegate, n: int, fault: Any, finished: Any, timeout_s: float = 60.0) -> set[Any]:
    """A spout on the real clock: ``next_tuple`` in a loop, every emit acked at once (its second
    value, the record's, kept); ``fault()`` runs once a third of ``n`` records was seen; the loop
    ends when all ``n`` were seen and ``finished()`` (after one more ``next_tuple``, for the last
    acks) says the source holds nothing unacknowledged, or at the timeout. The values seen."""
    import time

    seen: set[Any] = set()
    done, faulted = 0, False
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        s.next_tuple()
        for v, tid in d.emitted[done:]:
            seen.add(v[1])
            s.ack(tid)
        done = len(d.emitted)
        if not faulted and len(seen) >= n // 3:
            faulted = True
            fault()
        if len(seen) == n:
            s.next_tuple()
            if finished():
                break
    return seen



class SinkTask:
    """A sink's task under effectively once, as in an instance: its StatefulTask over a real
    component host and checkpoint storage (topology ``eo``), fed by the spout ``words``; a
    restore is a new SinkTask (the process the executor relaunches)."""

    def __init__(self, plan: Any, storage: Any, sink: str = "sink") -> None:
        import logging

        from heron_py.runtime.host import HostOptions, make_host
        from heron_py.runtime.stateful import StatefulTask

        self.plan = plan
        self.me, self.src = plan.packing.tasks_of(sink)[0], plan.packing.tasks_of("words")[0]
        self.sent: list[bytes] = []  # what the task sends its stream manager, in order
        self.host = make_host(plan, self.me, self.sent.extend, HostOptions())
        self.rt = StatefulTask(self.host, storage, "eo", self.sent.extend, align_bytes=1 << 20,
                               log=logging.getLogger("test"))

    def start(self, restore_id: int, checkpoint_id: int) -> None:
        self.rt.restore(restore_id, checkpoint_id)
        self.rt.start_processing(restore_id)

    def words(self, *pairs: tuple[str, int]) -> None:
        from heron_py.common.framing import encode_batch_frame
        from heron_py.common.serialization import dumps_batch

        self.rt.on_batch(encode_batch_frame(self.me, self.src, dumps_batch([("default", [w, n]) for w, n in pairs]),
                                            count=len(pairs)))

    def barrier(self, checkpoint_id: int) -> None:
        from heron_py.common.framing import encode_marker

        self.rt.on_marker(encode_marker(self.me, self.src, checkpoint_id))

    def saved(self) -> list[tuple[int, bool]]:
        """The checkpoints this task reported saved, and whether each save failed."""
        from heron_py.common.framing import MsgType, frame_type
        from proto import heron_py_pb2 as pb

        return [(m.checkpoint_id, m.failed) for m in (pb.CheckpointSaved.FromString(f[6:]) for f in self.sent
                                                      if frame_type(f) == MsgType.CHECKPOINT_SAVED)]
