"""Storm's multilang messages, both ways, as typed values (pure: no I/O).

To the subprocess: the handshake (``Setup``), a bolt's input (``BoltTuple``, with heartbeats
and ticks as special streams), a spout's command (``SpoutCommand``) and the task ids an emit
went to (``TaskIds``). From the subprocess: the pid reply, then commands: emit, ack, fail,
log, error, metrics, sync. ``to_wire`` gives the JSON-able value a framing writes;
``parse_command`` / ``parse_pid`` / ``parse_to_child`` validate what a framing read, with
errors that say which field was wrong and what was found.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from heron_py.multilang.errors import ProtocolError

DEFAULT_STREAM = "default"
HEARTBEAT_STREAM = "__heartbeat"
TICK_STREAM = "__tick"
SYSTEM_COMPONENT = "__system"
SYSTEM_TASK = -1  # the task id of heartbeat and tick tuples (Storm's Constants.SYSTEM_TASK_ID)
SPOUT_COMMANDS = ("next", "ack", "fail", "activate", "deactivate")
COMMANDS = ("ack", "emit", "error", "fail", "log", "metrics", "sync")
# Storm's ShellMsg.ShellLogLevel 0..4 (trace, debug, info, warn, error) -> Python levels;
# Python has no trace, so trace logs at debug (as heronpy's "trace")
LOG_LEVELS = {0: logging.DEBUG, 1: logging.DEBUG, 2: logging.INFO, 3: logging.WARNING, 4: logging.ERROR}


@dataclass(frozen=True)
class Setup:
    conf: dict[str, Any]
    pid_dir: str
    context: dict[str, Any]


@dataclass(frozen=True)
class BoltTuple:
    id: str
    comp: str
    stream: str
    task: int
    values: list[Any]


@dataclass(frozen=True)
class SpoutCommand:
    command: str
    id: Any = ""  # Storm sends "" with next/activate/deactivate


@dataclass(frozen=True)
class TaskIds:
    tasks: list[int]


@dataclass(frozen=True)
class PidReply:
    pid: int


@dataclass(frozen=True)
class Emit:
    values: list[Any]
    stream: str = DEFAULT_STREAM
    anchors: tuple[str, ...] = ()
    task: int | None = None  # a direct emit's task
    need_task_ids: bool = True  # Storm's default: the subprocess waits for the task ids
    id: Any = None  # a spout's message id (None: untracked)

    @property
    def wants_task_ids(self) -> bool:
        """Storm answers only non-direct emits: storm.js's emitDirect waits for nothing."""
        return self.need_task_ids and self.task is None


@dataclass(frozen=True)
class Ack:
    id: Any


@dataclass(frozen=True)
class Fail:
    id: Any


@dataclass(frozen=True)
class Log:
    msg: str
    level: int = 2

    @property
    def python_level(self) -> int:
        return LOG_LEVELS.get(self.level, logging.INFO)  # Storm: an unknown level is info


@dataclass(frozen=True)
class Error:
    msg: str


@dataclass(frozen=True)
class Metrics:
    name: str
    params: Any = None


@dataclass(frozen=True)
class Sync:
    pass


Command = Emit | Ack | Fail | Log | Error | Metrics | Sync
ToChild = Setup | BoltTuple | SpoutCommand | TaskIds
Message = ToChild | PidReply | Command


def heartbeat(tuple_id: str) -> BoltTuple:
    return BoltTuple(tuple_id, "", HEARTBEAT_STREAM, SYSTEM_TASK, [])


def tick(tuple_id: str, freq_s: float | None) -> BoltTuple:
    return BoltTuple(tuple_id, SYSTEM_COMPONENT, TICK_STREAM, SYSTEM_TASK, [freq_s] if freq_s else [])


def to_wire(msg: Message) -> Any:
    """The JSON-able value of ``msg`` as Storm writes it (optional fields left out when unset)."""
    if isinstance(msg, Setup):
        return {"conf": msg.conf, "pidDir": msg.pid_dir, "context": msg.context}
    if isinstance(msg, BoltTuple):
        return {"id": msg.id, "comp": msg.comp, "stream": msg.stream, "task": msg.task, "tuple": msg.values}
    if isinstance(msg, SpoutCommand):
        return {"command": msg.command, "id": msg.id}
    if isinstance(msg, TaskIds):
        return list(msg.tasks)
    if isinstance(msg, PidReply):
        return {"pid": msg.pid}
    if isinstance(msg, Emit):
        return _emit_wire(msg)
    if isinstance(msg, (Ack, Fail)):
        return {"command": "ack" if isinstance(msg, Ack) else "fail", "id": msg.id}
    if isinstance(msg, Log):
        return {"command": "log", "msg": msg.msg, "level": msg.level}
    if isinstance(msg, Error):
        return {"command": "error", "msg": msg.msg}
    if isinstance(msg, Metrics):
        return {"command": "metrics", "name": msg.name, "params": msg.params}
    return {"command": "sync"}


def _emit_wire(msg: Emit) -> dict[str, Any]:
    out: dict[str, Any] = {"command": "emit", "tuple": msg.values}
    if msg.stream != DEFAULT_STREAM:
        out["stream"] = msg.stream
    if msg.anchors:
        out["anchors"] = list(msg.anchors)
    if msg.task is not None:
        out["task"] = msg.task
    if not msg.need_task_ids:
        out["need_task_ids"] = False
    if msg.id is not None:
        out["id"] = msg.id
    return out


def _field(obj: Mapping[str, Any], key: str, types: type | tuple[type, ...], what: str,
           default: Any = ...) -> Any:
    """``obj[key]``, checked against ``types``; ``default`` when absent or null (if given)."""
    value = obj.get(key)
    if value is None and default is not ...:
        return default
    if value is None:
        raise ProtocolError(f"multilang: {what} has no '{key}' field; found {_show(obj)}")
    if not isinstance(value, types) or (isinstance(value, bool) and bool not in _tuple(types)):
        names = " or ".join(t.__name__ for t in _tuple(types))
        raise ProtocolError(f"multilang: {what} field '{key}' must be {names}; found {_show(value)}")
    return value


def _tuple(types: type | tuple[type, ...]) -> tuple[type, ...]:
    return types if isinstance(types, tuple) else (types,)


def _show(value: Any, limit: int = 200) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + f"... ({len(text)} chars)"


def parse_pid(obj: Any) -> PidReply:
    """The handshake's reply: ``{"pid": N}``."""
    if not isinstance(obj, dict):
        raise ProtocolError(f"multilang: the handshake reply must be a map with 'pid'; found {_show(obj)}")
    return PidReply(_field(obj, "pid", int, "the handshake reply"))


def parse_command(obj: Any) -> Command:
    """One command from the subprocess, validated."""
    if not isinstance(obj, dict):
        raise ProtocolError(f"multilang: a message from the subprocess must be a map with a 'command'; "
                            f"found {_show(obj)}")
    command = obj.get("command")
    if command not in COMMANDS:
        raise ProtocolError(f"multilang: unknown command {command!r} from the subprocess; expected one of "
                            f"{', '.join(COMMANDS)}")
    what = f"'{command}' command"
    if command == "emit":
        return _parse_emit(obj)
    if command in ("ack", "fail"):
        if obj.get("id") is None:
            raise ProtocolError(f"multilang: {what} has no 'id' field; found {_show(obj)}")
        return (Ack if command == "ack" else Fail)(obj["id"])
    if command == "log":
        level = obj.get("level")
        return Log(str(_field(obj, "msg", object, what)),
                   level if isinstance(level, int) and not isinstance(level, bool) else 2)
    if command == "error":
        return Error(str(_field(obj, "msg", object, what)))
    if command == "metrics":
        return Metrics(_field(obj, "name", str, what), obj.get("params"))
    return Sync()


def _parse_emit(obj: dict[str, Any]) -> Emit:
    what = "'emit' command"
    values = _field(obj, "tuple", list, what)
    stream = _field(obj, "stream", str, what, DEFAULT_STREAM)
    anchors = obj.get("anchors")
    if anchors is None:
        anchors = []
    elif isinstance(anchors, (str, int)) and not isinstance(anchors, bool):
        anchors = [anchors]  # Storm takes a lone anchor id as a list of one
    elif not isinstance(anchors, list):
        raise ProtocolError(f"multilang: {what} field 'anchors' must be a list of tuple ids; "
                            f"found {_show(anchors)}")
    task = _field(obj, "task", int, what, None)
    need = _field(obj, "need_task_ids", bool, what, True)
    return Emit(values, stream, tuple(str(a) for a in anchors), task, need, obj.get("id"))


def parse_to_child(obj: Any) -> ToChild:
    """A message the engine sends, read back (the adapter's side; tests use it)."""
    if isinstance(obj, list):
        if not all(isinstance(t, int) for t in obj):
            raise ProtocolError(f"multilang: task ids must be a list of integers; found {_show(obj)}")
        return TaskIds(list(obj))
    if not isinstance(obj, dict):
        raise ProtocolError(f"multilang: expected a map or a list of task ids; found {_show(obj)}")
    if "pidDir" in obj:
        return Setup(_field(obj, "conf", dict, "the handshake"), _field(obj, "pidDir", str, "the handshake"),
                     _field(obj, "context", dict, "the handshake"))
    if "command" in obj:
        command = obj["command"]
        if command not in SPOUT_COMMANDS:
            raise ProtocolError(f"multilang: unknown spout command {command!r}; expected one of "
                                f"{', '.join(SPOUT_COMMANDS)}")
        return SpoutCommand(command, obj.get("id", ""))
    what = "a bolt tuple"
    return BoltTuple(_field(obj, "id", str, what), _field(obj, "comp", str, what), _field(obj, "stream", str, what),
                     _field(obj, "task", int, what), _field(obj, "tuple", list, what))


__all__ = ["Ack", "BoltTuple", "Command", "Emit", "Error", "Fail", "Log", "Message", "Metrics", "PidReply",
           "Setup", "SpoutCommand", "Sync", "TaskIds", "ToChild"]
