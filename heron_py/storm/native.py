"""pystorm components run inside the heron-py instance, on the task's thread.

A pystorm Bolt/Spout talks to Storm only through ``send_message`` (multilang command dicts:
emit, ack, fail, log, error, sync) and ``read_message``/``read_tuple``/``read_task_ids``.
The adapters below replace those on the user's object, so every pystorm method (``emit``
with ``auto_anchor``, ``emit_many``, ``ack``, ``fail``, ``log``, ``raise_exception``,
BatchingBolt's batching) runs unchanged and its messages are handled here, as Python dicts:
no subprocess, no JSON. The component's own ``_run`` does one step per input (heartbeat,
tick or tuple, auto_ack), with ``read_tuple`` handing it the tuple we converted.

Tuple ids: each input gets a string id (multilang's ids are strings) mapped to our tuple, so
anchors and acks by id reach the right tuple; the entry goes when the tuple is acked or failed.

Errors: pystorm's ``run()`` logs the exception, reports it (``_handle_run_exception``: an
``error`` message with the traceback, and a fail of the current tuple(s) under auto_fail),
then exits the process. Here the report is logged at ERROR and the exception is raised
again, so the task dies and the executor restarts it (``exit_on_exception = False`` keeps
the task running instead, as in pystorm).

TicklessBatchingBolt: its timer thread would emit from another thread; the adapter does not
start it and runs ``process_batches`` from ``heron_poll`` (the host calls it on the task's
thread) every ``secs_between_batches``.
"""

from __future__ import annotations

import io
import logging
import os
import threading
import time
from collections import namedtuple
from collections.abc import Callable
from pathlib import Path
from typing import Any

from heron_py.api.bolt.bolt import Bolt
from heron_py.api.spout.spout import Spout
from heron_py.common.config import TICK
from heron_py.common.serialization import resolve_user_name
from heron_py.multilang.setup import package_working_dir
from heron_py.storm import CLASS_KEY

# Storm's multilang log levels (pystorm's _STORM_LOG_LEVELS) → Python's
_LOG_LEVELS = {0: logging.DEBUG, 1: logging.DEBUG, 2: logging.INFO, 3: logging.WARNING, 4: logging.ERROR}
_PY_LEVELS = {"critical": logging.CRITICAL, "error": logging.ERROR, "warning": logging.WARNING,
              "warn": logging.WARNING, "info": logging.INFO, "debug": logging.DEBUG, "trace": logging.DEBUG}


class PystormError(Exception):
    pass


def load_class(path: Any) -> type:
    """``module:qualname`` → the class (``__main__``: the topology file, as the package loads it)."""
    if not isinstance(path, str) or ":" not in path:
        raise PystormError(f"config {CLASS_KEY} is {path!r}; expected 'module:Class' (set by heron-py's "
                           f"streamparse translation)")
    mod_name, _, qualname = path.partition(":")
    obj = resolve_user_name(mod_name, qualname)
    if not isinstance(obj, type):
        raise PystormError(f"config {CLASS_KEY} '{path}' names {obj!r}; expected a pystorm Bolt or Spout class")
    return obj


def make_component(cls: Any) -> Any:
    """The user's component, without pystorm's signal handler (a debugger on SIGUSR1) and,
    for a TicklessBatchingBolt, without its timer thread (see the module docstring)."""
    import pystorm

    if issubclass(cls, pystorm.TicklessBatchingBolt):
        if cls.__init__ is not pystorm.TicklessBatchingBolt.__init__:
            raise PystormError(f"TicklessBatchingBolt subclass {cls.__qualname__} overrides __init__; the native "
                               f"adapter cannot run it: expected setup in initialize(), or the subprocess mode")
        comp = cls.__new__(cls)
        pystorm.BatchingBolt.__init__(comp, **_no_storm_args())
        comp.exc_info = None
        comp._batch_lock = threading.RLock()
        comp._batcher = None
        return comp
    return cls(**_no_storm_args())


def _no_storm_args() -> dict[str, Any]:
    """pystorm's constructor arguments for a component with no Storm on stdin/stdout: its
    serializer wraps the streams it is given in a TextIOWrapper, which closes the wrapped
    buffer when collected, so sys.stdin/sys.stdout must not be those streams."""
    return {"input_stream": io.BytesIO(), "output_stream": io.BytesIO(), "rdb_signal": None}


def storm_context(context: Any) -> dict[str, Any]:
    """Storm's multilang handshake context for this task."""
    topo = context.topology
    me = context.get_component_id()
    comp = topo.component(me)
    fields: dict[str, dict[str, list[str]]] = {}
    for i in comp.inputs:
        out = topo.component(i.component).output(i.stream)
        fields.setdefault(i.component, {})[i.stream] = list(out.fields) if out is not None else []
    return {
        "taskid": context.get_task_id(),
        "componentid": me,
        "task->component": {str(t): c for t, c in context.get_task_to_component_map().items()},
        "source->stream->fields": fields,
        "stream->outputfields": {s.name: list(s.fields) for s in comp.outputs},
    }


def storm_conf(config: dict[str, Any], context: Any) -> dict[str, Any]:
    conf = {k: v for k, v in config.items() if k != CLASS_KEY}
    conf.setdefault("topology.name", context.get_topology_name())
    return conf


def setup_component(comp: Any, conf: dict[str, Any], ctx: dict[str, Any]) -> None:
    """pystorm's ``_setup_component`` without its handler on the root logger and its
    redirect of ``sys.stdout`` (both are for a multilang subprocess; here the task's own
    logging applies)."""
    comp.topology_name = conf.get("topology.name", "")
    comp.task_id = ctx["taskid"]
    comp.component_name = ctx["componentid"]
    comp.debug = conf.get("topology.debug", False)
    comp.storm_conf = conf
    comp.context = ctx
    comp.logger = logging.getLogger(f"pystorm.component.{comp.component_name}")
    level = logging.DEBUG if comp.debug else _PY_LEVELS.get(str(conf.get("pystorm.log.level", "info")),
                                                             logging.INFO)
    comp.logger.setLevel(level)
    types = getattr(comp, "_source_tuple_types", None)
    if types is not None:  # a bolt: values as namedtuples per source stream (Storm 0.10+)
        for source, streams in ctx["source->stream->fields"].items():
            for stream, fields in streams.items():
                if fields:
                    name = f"{_ident(source.title())}{_ident(stream.title())}Tuple"
                    types[source][stream] = namedtuple(name, fields, rename=True)


def _ident(s: str) -> str:
    import re

    return re.sub(r"\W|^(?=\d)", "_", s)


class Link:
    """Our side of one pystorm component: its messages → our delegate's emit/ack/fail/log."""

    def __init__(self, comp: Any, delegate: Any, log: logging.Logger, is_spout: bool) -> None:
        import pystorm

        self.comp = comp
        self.delegate = delegate
        self.log = log
        self.is_spout = is_spout
        self.ids: dict[str, Any] = {}  # input id → our tuple, until acked or failed
        self._seq = 0
        self._tuple = pystorm.Tuple
        self._input: Any = None
        comp.send_message = self.on_message
        comp.serializer.send_message = self.on_message  # a StormHandler a user adds writes here
        comp.read_message = self._read_message
        comp.read_tuple = self._read_tuple
        self._handlers: dict[str, Callable[[dict[str, Any]], None]] = {
            "emit": self._emit, "ack": self._ack, "fail": self._fail, "log": self._log,
            "error": self._error, "sync": _ignore, "metrics": _ignore,
        }

    def on_message(self, msg: Any) -> None:
        if not isinstance(msg, dict):
            self.log.error("%s attempted to send a non dict message: %r", self.comp.component_name, msg)
            return
        handler = self._handlers.get(msg.get("command"))  # type: ignore[arg-type]
        if handler is None:
            self.log.warning("%s sent an unknown command %r; ignored", self.comp.component_name, msg)
            return
        handler(msg)

    def _read_message(self) -> Any:
        raise PystormError(f"{self.comp.component_name}: read_message() has no Storm to read from in a "
                           f"native component; expected the adapter to hand inputs over")

    def _read_tuple(self) -> Any:
        return self._input

    def _emit(self, msg: dict[str, Any]) -> None:
        stream = msg.get("stream") or "default"
        direct = msg.get("task")
        need = bool(msg.get("need_task_ids", True)) and direct is None
        if self.is_spout:
            sent = self.delegate.emit(msg["tuple"], stream, None, direct, need, msg.get("id"))
        else:
            ids = self.ids
            anchors = [ids[a] for a in msg.get("anchors") or () if a in ids]
            sent = self.delegate.emit(msg["tuple"], stream, anchors, direct, need, None)
        if need:
            self.comp._pending_task_ids.append(list(sent or []))  # what read_task_ids() returns

    def _ack(self, msg: dict[str, Any]) -> None:
        tup = self.ids.pop(msg.get("id"), None)  # type: ignore[arg-type]
        if tup is not None:
            self.delegate.ack(tup)

    def _fail(self, msg: dict[str, Any]) -> None:
        tup = self.ids.pop(msg.get("id"), None)  # type: ignore[arg-type]
        if tup is not None:
            self.delegate.fail(tup)

    def _log(self, msg: dict[str, Any]) -> None:
        self.log.log(_LOG_LEVELS.get(msg.get("level", 2), logging.INFO), "%s", msg.get("msg", ""))

    def _error(self, msg: dict[str, Any]) -> None:
        self.log.error("%s", msg.get("msg", ""))

    def convert(self, tup: Any, tick: bool = False) -> Any:
        """Our tuple → pystorm's Tuple(id, component, stream, task, values)."""
        self._seq += 1
        tid = str(self._seq)
        if tick:
            return self._tuple(tid, "__system", "__tick", -1, [])
        self.ids[tid] = tup
        values = tup.values
        vt = self.comp._source_tuple_types[tup.component].get(tup.stream)
        values = vt(*values) if vt is not None and len(values) == len(vt._fields) else tuple(values)
        return self._tuple(tid, tup.component, tup.stream, tup.task, values)

    def run_step(self, step: Callable[[], Any], tup: Any = None) -> None:
        """One step of the component, with pystorm's ``run()`` error handling."""
        self._input = tup
        try:
            step()
        except Exception as e:
            comp = self.comp
            self.log.error("Exception in %s.run()", type(comp).__name__)
            try:
                comp._handle_run_exception(e)
            except Exception:
                self.log.exception("While trying to handle previous exception...")
            if getattr(comp, "exit_on_exception", True):
                raise  # the task dies; the executor restarts it


def _ignore(msg: dict[str, Any]) -> None:
    pass


def enter_working_dir(log: logging.Logger, where: str) -> Path | None:
    """Moves this process into the topology package's working folder, where Storm runs a
    pystorm component (its subprocess's cwd: the jar's resources/, which holds a streamparse
    project's src/), so the component's relative paths (``open("resources/data.txt")``) mean
    what they mean on Storm. Inside an unpacked package only: an instance process runs one
    task; ``heron-py run`` and the in-process harness run every task in the user's folder.
    Returns the folder, or None when the process stays where it is."""
    folder = package_working_dir()
    if folder is None:
        return None
    try:
        os.chdir(folder)
    except OSError as e:
        raise PystormError(f"{where}: cannot enter the topology package's working folder {folder} ({e}); "
                           f"expected the folder the executor unpacked") from e
    log.debug("%s runs in %s", where, folder)
    return folder


def _start(adapter: Any, config: dict[str, Any], context: Any, is_spout: bool) -> Link:
    enter_working_dir(adapter.logger, f"{'spout' if is_spout else 'bolt'} '{context.get_component_id()}'")
    comp = make_component(load_class(config.get(CLASS_KEY)))
    link = Link(comp, adapter.delegate, adapter.logger, is_spout)
    conf, ctx = storm_conf(config, context), storm_context(context)
    setup_component(comp, conf, ctx)
    comp.initialize(conf, ctx)
    return link


class PystormBolt(Bolt):
    """Runs the pystorm Bolt named by config ``heron_py.pystorm.class``. pystorm does its own
    auto_anchor/auto_ack/auto_fail, so the host's are off."""

    auto_anchor = False
    auto_ack = False
    auto_fail = False
    # a Storm component: more values than its stream declares are counted and cut to its
    # fields, as Storm lets them pass (heron_py.runtime.emitter.StormArity)
    heron_storm_arity = True

    def initialize(self, config: dict[str, Any], context: Any) -> None:
        import pystorm

        self.link = link = _start(self, config, context, False)
        self.pystorm = comp = link.comp
        self._step = comp._run
        if isinstance(comp, pystorm.TicklessBatchingBolt):
            secs = float(comp.secs_between_batches)
            self._next_batch = time.monotonic() + secs
            self.heron_poll = self._poll_batches
            self.heron_poll_interval_s = max(0.001, min(0.05, secs / 10))
        elif isinstance(comp, pystorm.BatchingBolt) and TICK.parse(config) is None:
            self.logger.warning("BatchingBolt %s gets no tick tuples, so its batches are never processed: "
                                "expected config topology.tick.tuple.freq.secs (seconds between ticks)",
                                type(comp).__name__)

    def process(self, tup: Any) -> None:
        link = self.link
        link.run_step(self._step, link.convert(tup))

    def process_tick(self, tup: Any) -> None:
        link = self.link
        link.run_step(self._step, link.convert(tup, tick=True))

    def _poll_batches(self) -> None:
        """TicklessBatchingBolt's timer, on the task's thread."""
        now = time.monotonic()
        if now < self._next_batch:
            return
        comp = self.pystorm
        self._next_batch = now + float(comp.secs_between_batches)

        def batch() -> None:
            with comp._batch_lock:
                comp.process_batches()

        self.link.run_step(batch)


class PystormSpout(Spout):
    """Runs the pystorm Spout named by config ``heron_py.pystorm.class``."""

    heron_storm_arity = True  # as PystormBolt's

    def initialize(self, config: dict[str, Any], context: Any) -> None:
        self.link = _start(self, config, context, True)
        self.pystorm = self.link.comp

    def next_tuple(self) -> None:
        self.link.run_step(self.pystorm.next_tuple)

    def ack(self, tup_id: Any) -> None:
        self.link.run_step(lambda: self.pystorm.ack(tup_id))

    def fail(self, tup_id: Any) -> None:
        self.link.run_step(lambda: self.pystorm.fail(tup_id))

    def activate(self) -> None:
        self.link.run_step(self.pystorm.activate)

    def deactivate(self) -> None:
        self.link.run_step(self.pystorm.deactivate)
