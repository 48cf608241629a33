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

from heron_py.common.framing import (
    ACK_ACK,
    ACK_FAIL,
    ACK_INIT,
    ACK_RECORD,
    BODY_OFFSET,
    DEFAULT_MAX_FRAME,
    HEADER_SIZE,
    MsgType,
    encode_batch_frame,
)
from heron_py.common.serialization import dumps_batch
from heron_py.planner.grouping import FieldsRouter, Router, check_direct, make_router
from heron_py.planner.model import GroupingKind, PhysicalPlan


class EmitError(Exception):
    pass


def oversized_message(component: str, task: int, stream: str, dest: int, size: int, limit: int,
                      count: int = 1) -> str:
    """The one error of a tuple too large for any frame: what, where, expected, found."""
    more = f" ({count - 1} more such tuples were refused too)" if count > 1 else ""
    return (f"component '{component}' task {task} emitted a tuple on stream '{stream}' to task {dest} that "
            f"serializes to {size} bytes: expected at most {limit} bytes (heron_py.network.max.frame.bytes "
            f"less the batch header), found {size}; the tuple was not sent{more}")


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
        max_frame: int = DEFAULT_MAX_FRAME,
    ) -> None:
        self.task_id = task_id
        self.batch_size = batch_size
        # a frame's length field counts the type and the batch header: the body gets the rest
        # of heron_py.network.max.frame.bytes, which every receiver's decoder enforces
        self.max_body = max_frame - (BODY_OFFSET - HEADER_SIZE + 2)
        self.max_frame = max_frame
        self._sink = sink
        self.pending: dict[int, list[Any]] = {}
        # ack records per spout task whose stream manager tracks the root: (kind, root, value)
        self.acks: dict[int, list[tuple[int, int, int]]] = {}
        self._rand = (rng or random.Random()).getrandbits
        self._count = 0
        self.emitted = 0
        # emits on streams other than "default" (default = emitted - these), for metrics
        self.emitted_by_stream: dict[str, int] = {}
        me = pplan.task(task_id)
        self.component = me.component
        comp = pplan.topology.component(me.component)
        self._fields = {s.name: s.fields for s in comp.outputs}
        self._nfields = {name: len(f) for name, f in self._fields.items()}
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
        # per stream with direct subscribers, every task a direct emit may name (any of them,
        # whichever component it belongs to: Storm sends the tuple to that task alone)
        self._direct: dict[str, tuple[int, ...]] = {}
        for stream, edge_list in self._edges.items():
            direct = sorted({t for e in edge_list if e.router is None for t in e.targets})
            if direct:
                self._direct[stream] = tuple(direct)

    def _check(self, values: Sequence[Any], stream: str, direct_task: int | None = None) -> list[Edge]:
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
        direct = self._direct.get(stream)
        if direct is not None:
            # checked before any copy is added, so a refused emit sends nothing
            if direct_task is None:
                consumer = next(e.consumer for e in edges if e.router is None)
                raise EmitError(
                    f"component '{self.component}' emitted on stream '{stream}' without direct_task, "
                    f"but '{consumer}' subscribes to it with direct grouping"
                )
            check_direct(direct_task, direct)
        return edges

    def _tasks(self, edge: Edge, values: Sequence[Any], stream: str, direct_task: int | None) -> Sequence[int]:
        """Destinations of one copy on ``edge``; a direct edge takes the named task only when
        it is one of its own (``_check`` has already checked the task)."""
        if edge.router is not None:
            return edge.router.choose(values)
        return (direct_task,) if direct_task in edge.targets else ()

    def _add(self, task: int, row: Any) -> None:
        lst = self.pending.get(task)
        if lst is None:
            self.pending[task] = [row]
        else:
            lst.append(row)

    def emit_root(self, values: Sequence[Any], stream: str, direct_task: int | None, need_task_ids: bool,
                  root: int) -> tuple[list[int] | None, int]:
        """A spout's tracked emit: every copy gets a random 64-bit id descending from ``root``.
        Returns (task ids if asked, XOR of the copies' ids); an XOR of 0 means no copy was sent."""
        edges = self._check(values, stream, direct_task)
        me = self.task_id
        xor = 0
        sent: list[int] | None = [] if need_task_ids else None
        for edge in edges:
            tasks = self._tasks(edge, values, stream, direct_task)
            for t in tasks:
                k = self._rand(64) or 1
                xor ^= k
                self._add(t, (stream, values, ((me, root, k),)))
            if sent is not None:
                sent.extend(tasks)
        if xor:
            self.ack_record(me, ACK_INIT, root, xor)
        if stream != "default":
            self.emitted_by_stream[stream] = self.emitted_by_stream.get(stream, 0) + 1
        self._counted()
        return sent, xor

    def emit_anchored(self, values: Sequence[Any], stream: str, direct_task: int | None, need_task_ids: bool,
                      anchors: Sequence[Any]) -> list[int] | None:
        """A bolt's anchored emit (Storm's scheme): for each copy and each anchor a fresh edge id
        is XORed into the anchor's ack value and into the copy's id for each of its roots."""
        edges = self._check(values, stream, direct_task)
        sent: list[int] | None = [] if need_task_ids else None
        rand = self._rand
        for edge in edges:
            tasks = self._tasks(edge, values, stream, direct_task)
            for t in tasks:
                ids: dict[tuple[int, int], int] = {}
                for a in anchors:
                    if not a.roots:
                        continue
                    e = rand(64) or 1
                    a.ack_val ^= e
                    for (rt, rid, _) in a.roots:
                        ids[(rt, rid)] = ids.get((rt, rid), 0) ^ e
                self._add(t, (stream, values, tuple((rt, rid, v) for (rt, rid), v in ids.items())))
            if sent is not None:
                sent.extend(tasks)
        if stream != "default":
            self.emitted_by_stream[stream] = self.emitted_by_stream.get(stream, 0) + 1
        self._counted()
        return sent

    def ack_record(self, spout_task: int, kind: int, root: int, value: int) -> None:
        lst = self.acks.get(spout_task)
        if lst is None:
            self.acks[spout_task] = [(kind, root, value)]
        else:
            lst.append((kind, root, value))

    def ack(self, tup: Any) -> None:
        """Acks a received tracked tuple: per root, its id XOR the edges it gave its children."""
        for (rt, rid, v) in tup.roots:
            self.ack_record(rt, ACK_ACK, rid, v ^ tup.ack_val)

    def fail(self, tup: Any) -> None:
        for (rt, rid, _) in tup.roots:
            self.ack_record(rt, ACK_FAIL, rid, 0)

    def _counted(self) -> None:
        self.emitted += 1
        self._count += 1
        if self._count >= self.batch_size:
            self.flush()

    def emit(self, values: Sequence[Any], stream: str, direct_task: int | None,
             need_task_ids: bool) -> list[int] | None:
        """An untracked emit: the hot path, kept to one dict lookup and one route per edge."""
        edges = self._edges.get(stream)
        if edges is None or len(values) != self._nfields[stream] or stream in self._direct:
            self._check(values, stream, direct_task)  # raises if bad; checks a direct task
        assert edges is not None
        row = (stream, values)
        pending = self.pending
        sent: list[int] | None = [] if need_task_ids else None
        for edge in edges:
            router = edge.router
            tasks = router.choose(values) if router is not None else self._tasks(edge, values, stream, direct_task)
            for t in tasks:
                lst = pending.get(t)
                if lst is None:
                    pending[t] = [row]
                else:
                    lst.append(row)
            if sent is not None:
                sent.extend(tasks)
        if stream != "default":
            self.emitted_by_stream[stream] = self.emitted_by_stream.get(stream, 0) + 1
        self.emitted += 1
        self._count += 1
        if self._count >= self.batch_size:
            self.flush()
        return sent

    def default_stream_emit(self) -> Callable[..., list[int] | None] | None:
        """A closure for the hot case: an untracked emit on "default" whose only consumer
        routes by one field (fields grouping). It inlines the routing cache and the batch
        append, saving two Python calls per tuple (the profile's largest cost in a split bolt).
        None when the case does not apply; callers then use ``emit``."""
        edges = self._edges.get("default")
        if edges is None or len(edges) != 1 or not isinstance(edges[0].router, FieldsRouter):
            return None
        router = edges[0].router
        idx = router.single_index
        if idx is None:
            return None
        nfields = self._nfields["default"]
        cache_get = router.cache.get
        choose = router.choose
        pending = self.pending  # flush() clears it in place, so this reference stays valid
        pending_get = pending.get
        batch_size = self.batch_size
        slow = self.emit

        # heronpy's Bolt.emit signature, so it can be bound as the user's ``emit`` directly
        def emit_default(values: Sequence[Any], stream: str = "default", anchors: Any = None,
                         direct_task: int | None = None, need_task_ids: bool = False) -> list[int] | None:
            if stream != "default" or need_task_ids or direct_task is not None:
                return slow(values, stream, direct_task, need_task_ids)
            if len(values) != nfields:
                self._check(values, "default")  # raises
            key = values[idx]
            hit = cache_get(key) if type(key) is str else None
            t = hit[0] if hit is not None else choose(values)[0]
            lst = pending_get(t)
            if lst is None:
                pending[t] = [("default", values)]
            else:
                lst.append(("default", values))
            self.emitted += 1
            c = self._count + 1
            self._count = c
            if c >= batch_size:
                self.flush()
            return None

        return emit_default

    def flush(self) -> None:
        """Encodes what is pending into frames, none over the frame limit: a batch whose
        pickle is too large is split in halves until each part fits. A single tuple that
        does not fit alone is refused with EmitError (after the other frames went out), since
        every receiver would close the connection on it."""
        if not self._count and not self.acks:
            return
        src = self.task_id
        frames: list[bytes] = []
        if self.acks:
            # before the tuples: a root's init reaches its stream manager before any ack of it
            pack = ACK_RECORD.pack
            per_frame = max(1, self.max_body // ACK_RECORD.size)
            for dest, recs in self.acks.items():
                for i in range(0, len(recs), per_frame):
                    part = recs[i:i + per_frame]
                    frames.append(encode_batch_frame(dest, src, b"".join([pack(*r) for r in part]),
                                                     MsgType.ACK_BATCH, len(part)))
            self.acks = {}
        oversized: list[tuple[int, Any, int]] = []
        for dest, rows in self.pending.items():
            if rows:
                self._encode_rows(dest, rows, frames, oversized)
        self.pending.clear()
        self._count = 0
        if frames:
            self._sink(frames)
        if oversized:
            dest, row, size = oversized[0]
            raise EmitError(oversized_message(self.component, src, row[0], dest, size, self.max_body,
                                              len(oversized)))

    def _encode_rows(self, dest: int, rows: list[Any], frames: list[bytes],
                     oversized: list[tuple[int, Any, int]]) -> None:
        body = dumps_batch(rows)
        if len(body) <= self.max_body:
            frames.append(encode_batch_frame(dest, self.task_id, body, MsgType.TUPLE_BATCH, len(rows)))
        elif len(rows) == 1:
            oversized.append((dest, rows[0], len(body)))
        else:
            half = len(rows) // 2  # halves keep the order of the rows to one destination
            self._encode_rows(dest, rows[:half], frames, oversized)
            self._encode_rows(dest, rows[half:], frames, oversized)

    @property
    def has_pending(self) -> bool:
        return self._count > 0 or bool(self.acks)
