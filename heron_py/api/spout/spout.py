"""heronpy's Spout."""

from __future__ import annotations

from typing import Any

from heron_py.api.component.base_component import BaseComponent
from heron_py.api.component.component_spec import HeronComponentSpec
from heron_py.api.stream import Stream


class Spout(BaseComponent):
    @classmethod
    def spec(cls, name: str | None = None, par: int = 1, config: dict[str, Any] | None = None,
             optional_outputs: list[Any] | None = None) -> HeronComponentSpec:
        return HeronComponentSpec(name, cls, True, par, None, config, optional_outputs)

    def initialize(self, config: dict[str, Any], context: Any) -> None:
        pass

    def next_tuple(self) -> None:
        pass

    def ack(self, tup_id: Any) -> None:
        pass

    def fail(self, tup_id: Any) -> None:
        pass

    def activate(self) -> None:
        pass

    def deactivate(self) -> None:
        pass

    def close(self) -> None:
        pass

    def emit(self, tup: Any, tup_id: Any = None, stream: str = Stream.DEFAULT_STREAM_ID,
             direct_task: int | None = None, need_task_ids: bool = False) -> list[int] | None:
        return self.delegate.emit(tup, stream, None, direct_task, need_task_ids, tup_id)
