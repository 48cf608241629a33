"""Task hooks, called at every point heronpy defines: ``prepare`` after the component's
``initialize``, ``emit``, ``spout_ack``/``spout_fail``, ``bolt_execute``/``bolt_ack``/
``bolt_fail``, ``clean_up`` at the end. Hooks come from ``context.add_task_hook`` in
``initialize`` and from ``topology.auto.task.hooks`` (class paths, ``module.Class`` or
``module:Class``, a list or a comma-separated string), as in Heron.

The host asks for hooks only when a component has any: with none, no call on the hot path
changes (the specialised emit stays bound)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from heron_py.api.api_constants import TOPOLOGY_AUTO_TASK_HOOKS
from heron_py.api.task_hook import (
    BoltAckInfo,
    BoltExecuteInfo,
    BoltFailInfo,
    EmitInfo,
    ITaskHook,
    SpoutAckInfo,
    SpoutFailInfo,
)
from heron_py.common.serialization import resolve_user_name


class HookError(Exception):
    pass


def auto_hooks(conf: dict[str, Any]) -> list[ITaskHook]:
    """Instances of the classes ``topology.auto.task.hooks`` names."""
    raw = conf.get(TOPOLOGY_AUTO_TASK_HOOKS)
    if not raw:
        return []
    names = [n.strip() for n in raw.split(",")] if isinstance(raw, str) else [str(n) for n in raw]
    out = []
    for name in filter(None, names):
        module, _sep, cls = name.partition(":") if ":" in name else name.rpartition(".")
        try:
            hook = resolve_user_name(module, cls)()
        except (ImportError, AttributeError, ValueError, TypeError) as e:
            raise HookError(f"config {TOPOLOGY_AUTO_TASK_HOOKS}: expected importable ITaskHook classes "
                            f"(module.Class), found {name!r} ({e})") from None
        if not isinstance(hook, ITaskHook):
            raise HookError(f"config {TOPOLOGY_AUTO_TASK_HOOKS}: expected ITaskHook classes, found {name!r} "
                            f"({type(hook).__name__})")
        out.append(hook)
    return out


class Hooks:
    def __init__(self, hooks: Sequence[ITaskHook], task_id: int) -> None:
        self.hooks = list(hooks)
        self.task_id = task_id

    def prepare(self, conf: dict[str, Any], context: Any) -> None:
        for h in self.hooks:
            h.prepare(conf, context)

    def clean_up(self) -> None:
        for h in self.hooks:
            h.clean_up()

    def emit(self, values: Sequence[Any], stream: str, out_tasks: list[int] | None) -> None:
        info = EmitInfo(values, stream, self.task_id, out_tasks or [])
        for h in self.hooks:
            h.emit(info)

    def spout_ack(self, message_id: Any, latency_ms: float) -> None:
        info = SpoutAckInfo(message_id, self.task_id, latency_ms)
        for h in self.hooks:
            h.spout_ack(info)

    def spout_fail(self, message_id: Any, latency_ms: float) -> None:
        info = SpoutFailInfo(message_id, self.task_id, latency_ms)
        for h in self.hooks:
            h.spout_fail(info)

    def bolt_execute(self, tup: Any, latency_ms: float) -> None:
        info = BoltExecuteInfo(tup, self.task_id, latency_ms)
        for h in self.hooks:
            h.bolt_execute(info)

    def bolt_ack(self, tup: Any, latency_ms: float) -> None:
        info = BoltAckInfo(tup, self.task_id, latency_ms)
        for h in self.hooks:
            h.bolt_ack(info)

    def bolt_fail(self, tup: Any, latency_ms: float) -> None:
        info = BoltFailInfo(tup, self.task_id, latency_ms)
        for h in self.hooks:
            h.bolt_fail(info)
