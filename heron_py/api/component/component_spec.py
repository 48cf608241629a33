"""Component specs as heronpy builds them: what a class-style Topology and TopologyBuilder hold."""

from __future__ import annotations

import uuid
from typing import Any

from heron_py.api.stream import Stream
from heron_py.planner.errors import TopologyError


def merge_outputs(cls: Any, optional_outputs: Any) -> list[Any]:
    """The class's ``outputs`` plus ``optional_outputs``, copied so the class attribute never
    changes (heronpy's ``spec`` does the same)."""
    outputs = list(getattr(cls, "outputs", None) or [])
    if optional_outputs is not None:
        if not isinstance(optional_outputs, (list, tuple)):
            raise TypeError(f"{getattr(cls, '__name__', cls)}.spec(): optional_outputs must be a list of field "
                            f"names or Streams, found {type(optional_outputs).__name__}")
        outputs.extend(optional_outputs)
    return outputs


def _stream_name(output: Any) -> str:
    return output.stream_id if isinstance(output, Stream) else Stream.DEFAULT_STREAM_ID


class HeronComponentSpec:
    """One spout or bolt of a topology, as ``Spout.spec`` / ``Bolt.spec`` make it.

    ``python_class_path`` is the component class itself (heronpy kept a "module.Class"
    string; a string is still accepted and imported at build). ``name`` may stay None until a
    class-style ``Topology`` names the spec after its attribute.
    """

    def __init__(self, name: str | None, python_class_path: Any, is_spout: bool, par: int,
                 inputs: Any = None, outputs: Any = None, config: dict[str, Any] | None = None) -> None:
        if name is not None and not isinstance(name, str):
            raise TypeError(f"component name must be a str, found {name!r}")
        self.name = name
        self.python_class_path = python_class_path
        self.is_spout = is_spout
        self.parallelism = par  # checked at build, with the component's name in the message
        self.inputs = inputs
        self.outputs = outputs
        self.custom_config = config
        # identifies an unnamed spec (class-style topologies name specs after the fact)
        self.uuid = str(uuid.uuid4())

    def get_out_streamids(self) -> set[str]:
        return {_stream_name(o) for o in (self.outputs or [])}

    def __getitem__(self, stream_id: str) -> GlobalStreamId:
        """``spec["stream"]``: that output stream of this component, for a bolt's inputs."""
        declared = self.get_out_streamids()
        if stream_id not in declared:
            who = f"component '{self.name}'" if self.name else f"component of class {self._class_label()}"
            raise TopologyError(f"{who} has no output stream '{stream_id}' "
                                f"(declared streams: {sorted(declared)})")
        return GlobalStreamId(self.name or self, stream_id)

    def _class_label(self) -> str:
        c = self.python_class_path
        return c if isinstance(c, str) else getattr(c, "__qualname__", repr(c))

    def __repr__(self) -> str:
        kind = "spout" if self.is_spout else "bolt"
        return f"HeronComponentSpec({kind} {self.name!r}, {self._class_label()}, par={self.parallelism!r})"


class GlobalStreamId:
    """A (component, stream) pair, as heronpy's; ``spec["stream"]`` makes one.

    ``componentId`` may be a spec whose name is not known yet (class-style topologies name
    specs after the class body ran), so the name is read when asked for.
    """

    def __init__(self, componentId: str | HeronComponentSpec, streamId: str) -> None:
        if not isinstance(componentId, (str, HeronComponentSpec)):
            raise TypeError(f"GlobalStreamId: componentId must be a str or a component spec, found {componentId!r}")
        if not isinstance(streamId, str):
            raise TypeError(f"GlobalStreamId: streamId must be a str, found {streamId!r}")
        self._component_id = componentId
        self.stream_id = streamId

    @property
    def component_id(self) -> str:
        comp = self._component_id
        if isinstance(comp, HeronComponentSpec):
            # unnamed yet: a stable placeholder keeps __eq__/__hash__ usable, as heronpy
            return comp.name if comp.name is not None else f"<unnamed component {comp.uuid}>"
        return comp

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, GlobalStreamId) and self.component_id == other.component_id
                and self.stream_id == other.stream_id)

    def __hash__(self) -> int:
        # the stream id alone: a spec's name may be set after this object went into a dict
        return hash(self.stream_id)

    def __str__(self) -> str:
        return f"{self.component_id}:{self.stream_id}"

    def __repr__(self) -> str:
        return f"GlobalStreamId({self.component_id!r}, {self.stream_id!r})"
