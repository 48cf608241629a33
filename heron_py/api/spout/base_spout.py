"""heronpy's BaseSpout: ``spec`` and ``emit`` (the lifecycle methods are on ``Spout``)."""

from __future__ import annotations

from typing import Any

from heron_py.api.component.base_component import BaseComponent
from heron_py.api.component.component_spec import HeronComponentSpec, merge_outputs
from heron_py.api.stream import Stream


class BaseSpout(BaseComponent):
    @classmethod
    def spec(cls, name: str | None = None, par: int = 1, config: dict[str, Any] | None = None,
             optional_outputs: list[Any] | None = None) -> HeronComponentSpec:
        """A spout of this class in a topology. ``optional_outputs`` adds to the ``outputs``
        class attribute (for output fields known only when the topology is built)."""
        return HeronComponentSpec(name, cls, True, par, inputs=None,
                                  outputs=merge_outputs(cls, optional_outputs), config=config)

    def emit(self, tup: Any, tup_id: Any = None, stream: str = Stream.DEFAULT_STREAM_ID,
             direct_task: int | None = None, need_task_ids: bool = False) -> list[int] | None:
        """Emits ``tup`` (a list or tuple of values). With a ``tup_id`` and acking on, the
        spout's ``ack``/``fail`` later receives that id."""
        return self.delegate.emit(tup, stream, None, direct_task, need_task_ids, tup_id)
