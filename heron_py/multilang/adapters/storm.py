"""heron-py's Python adapter for Storm's multilang protocol: the module ``storm`` that
shell components written for Apache Storm import.

It offers the API of Storm's own storm.py, so those scripts run unchanged::

    import storm

    class SplitSentenceBolt(storm.BasicBolt):
        def process(self, tup):
            for word in tup.values[0].split(" "):
                storm.emit([word])

    SplitSentenceBolt().run()

heron-py puts this file's folder on the subprocess's PYTHONPATH after the entries it already
has: a ``storm.py`` beside the script (a project's own adapter) is imported instead.

The protocol, over stdin and stdout, each message being JSON followed by a line ``end``: the
engine sends the setup (``conf``, ``context``, ``pidDir``) and the component answers with its
pid; a bolt then reads tuples (``__heartbeat`` ones are answered with ``sync``), a spout reads
commands (``next``, ``ack``, ``fail``, ``activate``, ``deactivate``) and answers each with
``sync`` once done. An emit is answered with the task ids it went to (a list), unless it is
direct or says ``need_task_ids: false``.

Beyond Storm's storm.py: the pipes are read and written as UTF-8 whatever the locale; once a
component runs, ``print()`` goes to stderr (which the engine logs) instead of corrupting the
protocol on stdout; the end of stdin ends ``run()`` quietly; ``emit(..., need_task_ids=False)``
skips the task ids; anchors may be tuples or tuple ids; ``Tuple.is_tick_tuple()``.
The camelCase names are Storm's, kept for the scripts written against them. Standard library
only, Python 3.7 or newer.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import traceback
from collections import deque
from collections.abc import Callable
from typing import IO, Any

HEARTBEAT_STREAM = "__heartbeat"
TICK_STREAM = "__tick"
SYSTEM_TASK = -1
LOG_LEVELS = {"trace": 0, "debug": 1, "info": 2, "warn": 3, "error": 4}

# which kind of component run() started: emit() builds a bolt's or a spout's message
MODE: type[Bolt] | type[Spout] | None = None
# the tuple a BasicBolt is processing: its emits are anchored to it
ANCHOR_TUPLE: Tuple | None = None
# messages read while waiting for something else: commands while waiting for task ids, and
# task ids while waiting for a command (the engine may send them in either order)
pending_commands: deque[dict[str, Any]] = deque()
pending_taskids: deque[list[int]] = deque()

_write_lock = threading.Lock()
# where protocol messages go; taken from sys.stdout when the component starts (initComponent)
_protocol_out: IO[bytes] | None = None


class EndOfInput(Exception):
    """stdin ended: the engine closed the pipe (the task is being stopped)."""


def json_encode(value: Any) -> str:
    return json.dumps(value)


def json_decode(text: str) -> Any:
    return json.loads(text)


def _stdin() -> IO[bytes]:
    return sys.stdin.buffer


def _stdout() -> IO[bytes]:
    if _protocol_out is not None:
        return _protocol_out
    return sys.stdout.buffer


def readMsg() -> Any:
    """The next message: the lines up to a line ``end``, decoded as one JSON value."""
    lines: list[bytes] = []
    stdin = _stdin()
    while True:
        line = stdin.readline()
        if not line:
            raise EndOfInput("Read EOF from stdin")
        line = line.rstrip(b"\r\n")
        if line == b"end":
            return json.loads(b"\n".join(lines).decode("utf-8"))
        if line or lines:  # blank lines between messages carry nothing
            lines.append(line)


def readTaskIds() -> list[int]:
    """The task ids of the oldest emit not yet answered; commands read meanwhile are kept."""
    if pending_taskids:
        return pending_taskids.popleft()
    msg = readMsg()
    while not isinstance(msg, list):
        pending_commands.append(msg)
        msg = readMsg()
    return msg


def readCommand() -> dict[str, Any]:
    """The next tuple (a bolt) or command (a spout); task ids read meanwhile are kept."""
    if pending_commands:
        return pending_commands.popleft()
    msg = readMsg()
    while isinstance(msg, list):
        pending_taskids.append(msg)
        msg = readMsg()
    if not isinstance(msg, dict):
        raise ValueError(f"storm.py: expected a tuple or a command (a JSON object) from the engine, found {msg!r}")
    return msg


def readTuple() -> Tuple:
    cmd = readCommand()
    return Tuple(cmd["id"], cmd["comp"], cmd["stream"], cmd["task"], cmd["tuple"])


def sendMsgToParent(msg: Any) -> None:
    data = json.dumps(msg).encode("utf-8") + b"\nend\n"
    out = _stdout()
    with _write_lock:  # one whole message at a time, should user code emit from threads
        out.write(data)
        out.flush()


def sync() -> None:
    sendMsgToParent({"command": "sync"})


def sendpid(heartbeatdir: str) -> None:
    pid = os.getpid()
    # Storm's supervisor finds the subprocesses to kill by these files; written first, so it
    # is there once the engine has the pid
    open(os.path.join(heartbeatdir, str(pid)), "w").close()
    sendMsgToParent({"pid": pid})


def emit(*args: Any, **kwargs: Any) -> list[int] | None:
    """A bolt's ``emit(tup, stream=None, anchors=[], directTask=None)`` or a spout's
    ``emit(tup, stream=None, id=None, directTask=None)``; returns the task ids the tuple went
    to (None for a direct emit or with ``need_task_ids=False``, which the engine leaves
    unanswered)."""
    if _emit(*args, **kwargs):
        return readTaskIds()
    return None


def emitDirect(task: int, *args: Any, **kwargs: Any) -> None:
    kwargs["directTask"] = task
    _emit(*args, **kwargs)


def _emit(*args: Any, **kwargs: Any) -> bool:
    if MODE is Bolt:
        return emitBolt(*args, **kwargs)
    if MODE is Spout:
        return emitSpout(*args, **kwargs)
    raise RuntimeError("storm.emit: no component is running; call it from a Bolt, BasicBolt or Spout started "
                       "with run()")


def _emit_message(tup: list[Any], stream: str | None, direct_task: int | None, need_task_ids: bool) -> dict[str, Any]:
    if not isinstance(tup, (list, tuple)):
        raise TypeError(f"storm.emit: the tuple must be a list of values, found {type(tup).__name__}: {tup!r}")
    m: dict[str, Any] = {"command": "emit", "tuple": list(tup)}
    if stream is not None:
        m["stream"] = stream
    if direct_task is not None:
        m["task"] = direct_task
    if not need_task_ids:
        m["need_task_ids"] = False
    return m


def emitBolt(tup: list[Any], stream: str | None = None, anchors: Any = (), directTask: int | None = None,
             need_task_ids: bool = True) -> bool:
    """Sends a bolt's emit; True when the engine will answer with task ids."""
    if ANCHOR_TUPLE is not None:
        anchors = [ANCHOR_TUPLE]
    m = _emit_message(tup, stream, directTask, need_task_ids)
    m["anchors"] = [getattr(a, "id", a) for a in anchors]
    sendMsgToParent(m)
    return need_task_ids and directTask is None


def emitSpout(tup: list[Any], stream: str | None = None, id: Any = None, directTask: int | None = None,
              need_task_ids: bool = True) -> bool:
    """Sends a spout's emit (``id``: its message id, for ack and fail); True when the engine
    will answer with task ids."""
    m = _emit_message(tup, stream, directTask, need_task_ids)
    if id is not None:
        m["id"] = id
    sendMsgToParent(m)
    return need_task_ids and directTask is None


def ack(tup: Tuple) -> None:
    sendMsgToParent({"command": "ack", "id": tup.id})


def fail(tup: Tuple) -> None:
    sendMsgToParent({"command": "fail", "id": tup.id})


def reportError(msg: str) -> None:
    sendMsgToParent({"command": "error", "msg": msg})


def log(msg: Any, level: int = 2) -> None:
    sendMsgToParent({"command": "log", "msg": msg, "level": level})


def logTrace(msg: Any) -> None:
    log(msg, LOG_LEVELS["trace"])


def logDebug(msg: Any) -> None:
    log(msg, LOG_LEVELS["debug"])


def logInfo(msg: Any) -> None:
    log(msg, LOG_LEVELS["info"])


def logWarn(msg: Any) -> None:
    log(msg, LOG_LEVELS["warn"])


def logError(msg: Any) -> None:
    log(msg, LOG_LEVELS["error"])


def rpcMetrics(name: str, params: Any) -> None:
    """Updates the engine-side metric registered under ``name`` (a ShellBolt subclass's)."""
    sendMsgToParent({"command": "metrics", "name": name, "params": params})


def initComponent() -> list[Any]:
    """The handshake: reads the setup, answers with the pid; returns [conf, context]."""
    global _protocol_out
    _protocol_out = _stdout()
    # from here on stdout is the protocol's alone: a print() of the component's code would
    # break it, so prints go to stderr, which the engine logs line by line
    sys.stdout = sys.stderr
    setup = readMsg()
    sendpid(setup["pidDir"])
    return [setup["conf"], setup["context"]]


def _died() -> None:
    """An error the component cannot go on after: reported, on stderr too (the engine shows
    stderr's last lines when the subprocess ends), then the process exits."""
    text = traceback.format_exc()
    sys.stderr.write(text)
    sys.stderr.flush()
    try:
        reportError(text)
    except OSError:
        pass  # the engine is gone: nothing to report to
    raise SystemExit(1)


class Tuple:
    def __init__(self, id: Any, component: str, stream: str, task: int, values: list[Any]) -> None:
        self.id = id
        self.component = component
        self.stream = stream
        self.task = task
        self.values = values

    def __repr__(self) -> str:
        fields = "".join(f" {k}={v!r}" for k, v in sorted(self.__dict__.items()))
        return f"<{type(self).__name__}{fields}>"

    def is_heartbeat_tuple(self) -> bool:
        return self.task == SYSTEM_TASK and self.stream == HEARTBEAT_STREAM

    def is_tick_tuple(self) -> bool:
        return self.task == SYSTEM_TASK and self.stream == TICK_STREAM


def _serve(mode: type, component: Any, step: Callable[[], None]) -> None:
    """A component's whole life: the handshake, its ``initialize``, then ``step`` (one input
    handled) until the engine closes stdin. An error the component cannot go on after ends the
    process (``_died``)."""
    global MODE
    MODE = mode
    conf, context = initComponent()
    try:
        component.initialize(conf, context)
        while True:
            step()
    except EndOfInput:
        return
    except Exception:
        _died()


def _input_tuple() -> Tuple:
    """The next tuple for the component: heartbeats are answered here (a sync), never passed on."""
    tup = readTuple()
    while tup.is_heartbeat_tuple():
        sync()
        tup = readTuple()
    return tup


class Bolt:
    """A bolt that acks and fails its tuples itself (``storm.ack(tup)``, ``storm.fail(tup)``)."""

    def initialize(self, stormconf: dict[str, Any], context: dict[str, Any]) -> None:
        pass

    def process(self, tuple: Tuple) -> None:
        pass

    def run(self) -> None:
        _serve(Bolt, self, lambda: self.process(_input_tuple()))


class BasicBolt:
    """A bolt whose emits are anchored to the tuple being processed, which is acked once
    ``process`` returns and failed (the error reported) if it raises."""

    def initialize(self, stormconf: dict[str, Any], context: dict[str, Any]) -> None:
        pass

    def process(self, tuple: Tuple) -> None:
        pass

    def _one(self) -> None:
        global ANCHOR_TUPLE
        tup = ANCHOR_TUPLE = _input_tuple()
        try:
            self.process(tup)
        except EndOfInput:
            raise
        except Exception:  # this tuple's error, not the bolt's: the next one is processed
            reportError(traceback.format_exc())
            fail(tup)
        else:
            ack(tup)

    def run(self) -> None:
        _serve(Bolt, self, self._one)


class Spout:
    def initialize(self, conf: dict[str, Any], context: dict[str, Any]) -> None:
        pass

    def activate(self) -> None:
        pass

    def deactivate(self) -> None:
        pass

    def ack(self, id: Any) -> None:
        pass

    def fail(self, id: Any) -> None:
        pass

    def nextTuple(self) -> None:
        pass

    def _one(self) -> None:
        """One command, answered with a sync whatever it was (the engine waits for it)."""
        msg = readCommand()
        handlers: dict[str, Callable[[], None]] = {  # Storm's commands; any other is only synced
            "next": self.nextTuple, "activate": self.activate, "deactivate": self.deactivate,
            "ack": lambda: self.ack(msg["id"]), "fail": lambda: self.fail(msg["id"])}
        handler = handlers.get(str(msg.get("command")))
        if handler is not None:
            handler()
        sync()

    def run(self) -> None:
        _serve(Spout, self, self._one)
