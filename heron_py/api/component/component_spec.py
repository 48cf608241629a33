"""Component specs as heronpy builds them: what a class-style Topology and TopologyBuilder hold."""

from __future__ import annotations

from typing import Any


class GlobalStreamId:
    """A (component, stream) pair, as heronpy's; ``spec["stream"]`` makes one."""

    def __init__(self, componentId: Any, streamId: str) -> None:
        self._component = componentId
        self.stream_id = streamId

    @property
    def component_id(self) -> str:
        comp = self._component
        if isinstance(comp, HeronComponentSpec):
            if comp.name is None:
                raise RuntimeError("the component this stream belongs to has no name yet")
            return comp.name
        return str(comp)

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, GlobalStreamId) and self.component_id == other.component_id
                and self.stream_id == other.stream_id)

    def __hash__(self) -> int:
        return hash(self.stream_id)  # consistent with __eq__ whatever form the component has

    def __repr__(self) -> str:
        return f"GlobalStreamId({self._component!r}, {self.stream_id!r})"


class HeronComponentSpec:
    def __init__(self, name: str | None, python_class_path: Any, is_spout: bool, par: int,
                 inputs: Any = None, config: dict[str, Any] | None = None,
                 optional_outputs: list[Any] | None = None) -> None:
        self.name = name
        self.python_class_path = python_class_path  # heron-py keeps the class itself
        self.is_spout = is_spout
        self.parallelism = par
        self.inputs = inputs
        self.custom_config = config
        self.outputs = optional_outputs

    def __getitem__(self, stream_id: str) -> GlobalStreamId:
        return GlobalStreamId(self, stream_id)

    def __repr__(self) -> str:
        kind = "spout" if self.is_spout else "bolt"
        return f"HeronComponentSpec({kind} {self.name!r}, par={self.parallelism})"
