"""heronpy's Builder: where a Streamlet program starts (new_source)."""

from __future__ import annotations

from typing import Any

from heron_py.api.streamlet import components as comp
from heron_py.api.streamlet import graph
from heron_py.api.streamlet.errors import StreamletError
from heron_py.api.streamlet.generator import Generator
from heron_py.api.streamlet.stage import Stage
from heron_py.api.streamlet.streamlet import Streamlet
from heron_py.api.topology import TopologyBuilder


class Builder:
    def __init__(self) -> None:
        self._sources: list[Streamlet] = []

    def new_source(self, source: Any) -> Streamlet:
        """A source streamlet (one partition unless set_num_partitions says more): a Generator
        object, or a function called for each element."""
        if isinstance(source, Generator):
            stage = Stage("generator", comp.GeneratorSpout, {comp.GENERATOR: source}, grouping=None)
        elif callable(source):
            stage = Stage("supplier", comp.SupplierSpout, {comp.FUNCTION: source}, grouping=None)
        else:
            raise StreamletError(f"Builder.new_source: expected a Generator or a function, found {source!r} "
                                 f"({type(source).__name__})")
        streamlet = Streamlet(stage)
        self._sources.append(streamlet)
        return streamlet

    def build(self, bldr: TopologyBuilder, *, fusion: bool = True) -> None:
        """Adds every streamlet's spout or bolt to ``bldr`` (heronpy's signature). With
        ``fusion`` (heron-py's; on unless False), the stateless operators between two
        repartitions run in one task (graph.fuse)."""
        graph.add_to(bldr, self._sources, fusion=fusion)
