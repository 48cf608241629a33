"""heronpy's BaseBolt: ``spec``, ``emit``, ``ack``, ``fail``, ``is_tick``."""

from __future__ import annotations

from typing import Any

from heron_py.api.component.base_component import BaseComponent
from heron_py.api.component.component_spec import HeronComponentSpec, merge_outputs
from heron_py.api.stream import Stream
from heron_py.api.tuple import TupleHelper


class BaseBolt(BaseComponent):
    # Storm's BasicBolt / streamparse's options; off by default, as in heronpy. auto_anchor:
    # emits inside process() anchor to the input; auto_ack: the input is acked when process()
    # returns; auto_fail: an exception in process() fails the input and is logged instead of
    # ending the task.
    auto_anchor = False
    auto_ack = False
    auto_fail = False

    @classmethod
    def spec(cls, name: str | None = None, inputs: Any = None, par: int = 1,
             config: dict[str, Any] | None = None, optional_outputs: list[Any] | None = None) -> HeronComponentSpec:
        """A bolt of this class in a topology. ``inputs``: a dict {spec or spec["stream"]:
        Grouping} or a list of them (shuffle grouping), as heronpy."""
        return HeronComponentSpec(name, cls, False, par, inputs=inputs,
                                  outputs=merge_outputs(cls, optional_outputs), config=config)

    def emit(self, tup: Any, stream: str = Stream.DEFAULT_STREAM_ID, anchors: Any = None,
             direct_task: int | None = None, need_task_ids: bool = False) -> list[int] | None:
        return self.delegate.emit(tup, stream, anchors, direct_task, need_task_ids, None)

    def ack(self, tup: Any) -> None:
        self.delegate.ack(tup)

    def fail(self, tup: Any) -> None:
        self.delegate.fail(tup)

    @staticmethod
    def is_tick(tup: Any) -> bool:
        return bool(tup.stream == TupleHelper.TICK_TUPLE_ID)
