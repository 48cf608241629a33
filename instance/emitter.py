"""Routing and batching of emitted tuples, in the emitting instance. No I/O, no clock.

Per emitted tuple the work is: look up the stream's outgoing edges, ask each edge's router
for destination tasks, append one row to each destination's pending list. Rows are
serialized once per destination batch at flush, never per tuple.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from heron_py.common.framing import encode_batch_frame
from heron_py.common.serialization import dumps_batch
from heron_py.planner.grouping import Router, check_direct, make_router
from heron_py.planner.model import GroupingKind, PhysicalPlan


class EmitError(Exception):
    pass


@dataclass
class Edge:
    consumer: str
    kind: GroupingKind
    targets: tuple[int, ...]
    router: Router | None  # None for direct grouping


class Emitter:
    def __init__(
        self,
        pplan: PhysicalPlan,
        task_id: int,
        batch_size: int,
        sink: Callable[[list[bytes]], None],
        *,
        custom_loader: Callable[[bytes], Any],
        prepare_custom: Callable[[Any, str, str, list[int]], None],
        rng: random.Random | None = None,
    ) -> None:
        self.task_id = task_id
        self.batch_size = batch_size
        self._sink = sink
        self.pending: dict[int, list[Any]] = {}
        self._count = 0
        self.emitted = 0
        me = pplan.task(task_id)
        self.component = me.component
        comp = pplan.topology.component(me.component)
        self._fields = {s.name: s.fields for s in comp.outputs}
        local = frozenset(t.task_id for t in pplan.packing.tasks if t.container == me.container)
        rng = rng or random.Random()
        self._edges: dict[str, list[Edge]] = {s.name: [] for s in comp.outputs}
        for consumer in pplan.topology.components:
            for inp in consumer.inputs:
                if inp.component != me.component:
                    continue
                fields = self._fields.get(inp.stream, ())
                targets = pplan.packing.tasks_of(consumer.name)
                g = inp.grouping
                router: Router | None = None
                if g.kind is not GroupingKind.DIRECT:
                    custom = None
                    if g.kind is GroupingKind.CUSTOM:
                        assert g.custom is not None
                        custom = custom_loader(g.custom.data)
                        prepare_custom(custom, me.component, inp.stream, list(targets))
                    router = make_router(
                        g,
                        target_tasks=targets,
                        local_tasks=local,
                        field_indices=tuple(fields.index(f) for f in g.fields),
                        custom=custom,
                        rng=rng,
                        source_task=task_id,
                    )
                self._edges.setdefault(inp.stream, []).append(Edge(consumer.name, g.kind, targets, router))

    def emit(self, values: Sequence[Any], stream: str, direct_task: int | None,
             need_task_ids: bool) -> list[int] | None:
        edges = self._edges.get(stream)
        if edges is None:
            raise EmitError(
                f"component '{self.component}' emitted on stream '{stream}', which it does not declare "
                f"(declared streams: {sorted(self._fields)})"
            )
        nfields = len(self._fields[stream])
        if len(values) != nfields:
            raise EmitError(
                f"component '{self.component}' emitted {len(values)} values on stream '{stream}', "
                f"which declares {nfields} fields {list(self._fields[stream])}"
            )
        row = (stream, values)
        pending = self.pending
        sent: list[int] | None = [] if need_task_ids else None
        for edge in edges:
            if edge.router is None:
                if direct_task is None:
                    raise EmitError(
                        f"component '{self.component}' emitted on stream '{stream}' without direct_task, "
                        f"but '{edge.consumer}' subscribes to it with direct grouping"
                    )
                check_direct(direct_task, edge.targets)
                tasks: Sequence[int] = (direct_task,)
            else:
                tasks = edge.router.choose(values)
            for t in tasks:
                lst = pending.get(t)
                if lst is None:
                    pending[t] = [row]
                else:
                    lst.append(row)
            if sent is not None:
                sent.extend(tasks)
        self.emitted += 1
        self._count += 1
        if self._count >= self.batch_size:
            self.flush()
        return sent

    def flush(self) -> None:
        if not self._count:
            return
        src = self.task_id
        frames = [encode_batch_frame(dest, src, dumps_batch(rows)) for dest, rows in self.pending.items() if rows]
        self.pending = {}
        self._count = 0
        if frames:
            self._sink(frames)

    @property
    def has_pending(self) -> bool:
        return self._count > 0
