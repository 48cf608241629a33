"""Task hooks, as heronpy's: ``context.add_task_hook(hook)`` in ``initialize``.

The info records are what the runtime passes to each callback; users never build them.
"""

from __future__ import annotations

from collections import namedtuple
from typing import Any


class ITaskHook:
    """Override the callbacks you need; the defaults do nothing."""

    def prepare(self, conf: dict[str, Any], context: Any) -> None:
        """After the component's ``initialize``."""

    def clean_up(self) -> None:
        """Before the component shuts down (not guaranteed, as ``close``)."""

    def emit(self, emit_info: Any) -> None: ...

    def spout_ack(self, spout_ack_info: Any) -> None: ...

    def spout_fail(self, spout_fail_info: Any) -> None: ...

    def bolt_execute(self, bolt_execute_info: Any) -> None: ...

    def bolt_ack(self, bolt_ack_info: Any) -> None: ...

    def bolt_fail(self, bolt_fail_info: Any) -> None: ...


EmitInfo = namedtuple("EmitInfo", "values stream_id task_id out_tasks")
SpoutAckInfo = namedtuple("SpoutAckInfo", "message_id spout_task_id complete_latency_ms")
SpoutFailInfo = namedtuple("SpoutFailInfo", "message_id spout_task_id fail_latency_ms")
BoltExecuteInfo = namedtuple("BoltExecuteInfo", "heron_tuple executing_task_id execute_latency_ms")
BoltAckInfo = namedtuple("BoltAckInfo", "heron_tuple acking_task_id process_latency_ms")
BoltFailInfo = namedtuple("BoltFailInfo", "heron_tuple failing_task_id fail_latency_ms")
