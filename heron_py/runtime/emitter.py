"""Routing and batching of emitted tuples, in the emitting instance. No I/O, no clock.

Per emitted tuple the work is: look up the stream's outgoing edges, ask each edge's router
for destination tasks, append one row to each destination's pending list. Rows are
serialized once per destination batch at flush, never per tuple.
"""

from __future__ import annotations

import logging
import random
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import islice, repeat
from typing import Any

from heron_py.api.tuple import TrackedTuple
from heron_py.common.framing import (
    ACK_ACK,
    ACK_FAIL,
    ACK_RECORD,
    BODY_OFFSET,
    DEFAULT_MAX_FRAME,
    HEADER_SIZE,
    MsgType,
    encode_batch_frame,
)
from heron_py.common.serialization import ONE, RUN_LEN, body_rows, dumps_batch, dumps_body, expand_runs, row_count
from heron_py.planner.grouping import FieldsRouter, Router, check_direct, choose_many, make_router
from heron_py.planner.keygroups import max_parallelism
from heron_py.planner.model import GroupingDef, GroupingKind, PhysicalPlan, StreamDef, TaskPlacement
from heron_py.runtime.tracked import ROOTS, AckLog, Edges, Root, add_ids, anchor, ids_of, new_ids

# (field index, field count, routing cache get, choose): what the fast emit closures inline
_FastRoute = tuple[int, int, Callable[[Any], Any], Callable[[Sequence[Any]], Sequence[int]]]


class EmitError(Exception):
    pass


def oversized_message(component: str, task: int, stream: str, dest: int, size: int, limit: int,
                      count: int = 1) -> str:
    """The one error of a tuple too large for any frame: what, where, expected, found."""
    more = f" ({count - 1} more such tuples were refused too)" if count > 1 else ""
    return (f"component '{component}' task {task} emitted a tuple on stream '{stream}' to task {dest} that "
            f"serializes to {size} bytes: expected at most {limit} bytes (heron_py.network.max.frame.bytes "
            f"less the batch header), found {size}; the tuple was not sent{more}")


def ack_body_frames(dest: int, src: int, body: bytes | bytearray, max_body: int, frames: list[bytes]) -> None:
    """ACK_BATCH frames of a body of whole ACK_RECORD records to spout task ``dest``, each
    body at most ``max_body`` bytes."""
    rec = ACK_RECORD.size
    per_frame = max(1, max_body // rec) * rec
    for i in range(0, len(body), per_frame):
        part = body if len(body) <= per_frame else body[i:i + per_frame]
        frames.append(encode_batch_frame(dest, src, part, MsgType.ACK_BATCH, len(part) // rec))


def _choose_each(values_list: Sequence[Sequence[Any]], nfields: int,
                 chooses: list[Callable[[Sequence[Any]], Sequence[int]]],
                 check: Callable[[Sequence[Any]], Any]) -> Iterator[Sequence[int]]:
    """Each tuple's tasks over every consumer, checked (``check`` raises the stream's error)
    and chosen one tuple at a time, so the tuples before a bad one are emitted first."""
    for values in values_list:
        if len(values) != nfields:
            check(values)
        if len(chooses) == 1:
            yield chooses[0](values)
        else:
            yield [t for choose in chooses for t in choose(values)]


class StormArity:
    """Storm's rule for the values a Storm component emits (a multilang shell component, a
    pystorm or streamparse component), where heronpy's own components are refused: Storm
    compares a tuple's values with its stream's fields only when it builds the tuple for a
    consumer, and Storm 2.x only in local mode, so a component that emits more values than it
    declares runs in production. Here such an emit is counted per stream
    (``__emit-arity-mismatch/<stream>``, said in the task's log once per stream) and its tuple
    goes out with the declared fields' values, the first ones: all that a consumer can name.
    Storm hands its consumers the whole list, but the values past the declared fields have no
    field name (getValueByField reads the declared field's index), a pystorm consumer fails on
    them (its values are a namedtuple of the declared fields), and a sink that maps fields to
    columns would get a row longer than its schema. Fewer values than declared are refused when
    the stream has a consumer, which would read a missing field; with none, no tuple is built
    (as in Storm), so they are only counted."""

    def __init__(self, log: logging.Logger, component: str, task: int) -> None:
        self.log = log
        self.component = component
        self.task = task
        self.mismatches: dict[str, int] = {}  # emits per stream whose values did not match its fields

    def fit(self, values: Sequence[Any], stream: str, fields: Sequence[str],
            consumers: Sequence[str]) -> Sequence[Any] | None:
        """The values to send for an emit of ``len(values) != len(fields)`` values; None when
        it must be refused (fewer values than fields, and a consumer to read them)."""
        n = len(fields)
        if len(values) < n and consumers:
            return None
        seen = self.mismatches.get(stream, 0)
        self.mismatches[stream] = seen + 1
        if not seen:
            sent = f"sent its first {n}, as Storm's consumers read them" if consumers else \
                "nothing subscribes to the stream, so nothing was sent"
            self.log.warning("component '%s' task %d emitted %d values on stream '%s', which declares %d fields "
                             "%s: %s (Storm checks the count only in local mode); counted in "
                             "__emit-arity-mismatch/%s, said once per stream", self.component, self.task,
                             len(values), stream, n, list(fields), sent, stream)
        return values[:n] if len(values) > n else values


@dataclass
class Edge:
    consumer: str
    kind: GroupingKind
    targets: tuple[int, ...]
    router: Router | None  # None for direct grouping


@dataclass(frozen=True)
class EdgeSpec:
    """One output edge as a plan gives it: what its router is built from."""

    consumer: str
    stream: str
    grouping: GroupingDef
    targets: tuple[int, ...]  # the consumer's tasks, sorted
    max_par: int  # the consumer's key groups (0 for a direct edge, which has no router)


@dataclass(frozen=True)
class RouteSpec:
    """What a task's routes are built from, read off a plan: two plans with equal specs route
    the task's tuples alike, so a newer plan with the same spec needs no new routers."""

    component: str
    outputs: tuple[StreamDef, ...]
    local: frozenset[int]  # the tasks in this task's container (local-or-shuffle prefers them)
    edges: tuple[EdgeSpec, ...]


def route_spec(pplan: PhysicalPlan, task_id: int, me: TaskPlacement | None = None) -> RouteSpec:
    """Task ``task_id``'s routes under ``pplan``: each edge in the order the routers are made
    (the topology's consumers, then their inputs), so that a seeded rng draws as it always did.
    ``me``: the task's placement when ``pplan`` no longer holds it (a rescale removed it)."""
    if me is None:
        me = pplan.task(task_id)
    topo = pplan.topology
    packing = pplan.packing
    edges: list[EdgeSpec] = []
    for consumer in topo.components:
        for inp in consumer.inputs:
            if inp.component != me.component:
                continue
            targets = packing.tasks_of(consumer.name)
            direct = inp.grouping.kind is GroupingKind.DIRECT
            max_par = 0 if direct else max_parallelism(topo.config, consumer.config, len(targets))
            edges.append(EdgeSpec(consumer.name, inp.stream, inp.grouping, targets, max_par))
    local = frozenset(t.task_id for t in packing.tasks if t.container == me.container)
    return RouteSpec(me.component, topo.component(me.component).outputs, local, tuple(edges))


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
        # per destination task: rows (stream, values[, roots]) from the general emit paths, and
        # after them the hot paths' default-stream values (with their id triples at least once,
        # flat in an array). A general emit to a task first moves that task's hot values into
        # its rows (``_seal``), so the order of one task's tuples is the emit order.
        self.pending: dict[int, list[Any]] = {}
        self.hot: dict[int, list[Any]] = {}
        self.hot_ids: dict[int, array[int]] = {}
        # XOR updates per spout task whose stream manager tracks the root, merged per root until
        # the flush: root -> XOR of the init and ack values recorded for it here. The tracker
        # XORs inits and acks alike and XOR is associative, so one record carries them all (a
        # count task's ten acks of one sentence's words become one record). Fails are kept
        # apart and sent first: a fail ends its root whatever acks follow.
        self._acks: dict[int, dict[int, int]] = {}
        self.fails: dict[int, list[int]] = {}
        # the acks of received tuples since the last flush, written as ACK_BATCH bodies per
        # spout task as they come (each id XORed with its tuple's ack value as it was at the
        # ack; consecutive acks of one root, a sentence's words at a count task, as one record)
        self.ack_log = AckLog()
        # emits since the last flush (or discard), and before it: ``emitted`` is their sum, so
        # an emit updates one counter, not two
        self._count = 0
        self._flushed = 0
        # emits on streams other than "default" (default = emitted - these), for metrics
        self.emitted_by_stream: dict[str, int] = {}
        # kept for set_plan, which builds the routes again at a rescale: a custom grouping is
        # loaded and prepared anew for its new targets, as a restarted worker's would be
        self._custom_loader = custom_loader
        self._prepare_custom = prepare_custom
        self._rng = rng or random.Random()
        self._spec: RouteSpec | None = None
        self.set_plan(pplan)  # the routes: built where a rescale builds them again
        # edge ids (tracked.Edges, C), seeded after the routers drew: seeded routing stays as it was
        self._edge_ids = Edges(self._rng.getrandbits(64))
        self._edge = self._edge_ids.draw

    def set_plan(self, pplan: PhysicalPlan, me: TaskPlacement | None = None) -> bool:
        """The routes under ``pplan``, which must hold this task: ``__init__`` builds them here,
        and a live rescale's newer plan builds them again when it routes this task's tuples
        otherwise (a consumer's tasks, or which of them share this task's container). What is
        pending is flushed first, routed under the old plan. The counters, the ack log, the acks
        and fails not sent yet and the edge ids carry over; a custom grouping is loaded and
        prepared anew for its new targets. The closures ``default_stream_emit``,
        ``anchored_default_emit`` and ``spout_tracked_emit`` made before hold the old routers:
        the caller makes them again. Returns whether the routes changed (False: nothing done).
        ``me``: this task's placement when ``pplan`` no longer holds it (a rescale removed it: what
        it still emits goes to the consumers' new tasks)."""
        spec = route_spec(pplan, self.task_id, me)
        if spec == self._spec:
            return False
        self.flush()
        self._spec = spec
        self.component = spec.component
        self._fields = {s.name: s.fields for s in spec.outputs}
        self._nfields = {name: len(f) for name, f in self._fields.items()}
        edges: dict[str, list[Edge]] = {s.name: [] for s in spec.outputs}
        for e in spec.edges:
            g = e.grouping
            router: Router | None = None
            if g.kind is not GroupingKind.DIRECT:
                custom = None
                if g.kind is GroupingKind.CUSTOM:
                    assert g.custom is not None
                    custom = self._custom_loader(g.custom.data)
                    self._prepare_custom(custom, spec.component, e.stream, list(e.targets))
                fields = self._fields.get(e.stream, ())
                router = make_router(
                    g,
                    target_tasks=e.targets,
                    local_tasks=spec.local,
                    field_indices=tuple(fields.index(f) for f in g.fields),
                    custom=custom,
                    rng=self._rng,
                    source_task=self.task_id,
                    max_par=e.max_par,
                )
            edges.setdefault(e.stream, []).append(Edge(e.consumer, g.kind, e.targets, router))
        self._edges = edges
        # per stream with direct subscribers, every task a direct emit may name (any of them,
        # whichever component it belongs to: Storm sends the tuple to that task alone)
        self._direct: dict[str, tuple[int, ...]] = {}
        for stream, edge_list in edges.items():
            direct = sorted({t for e in edge_list if e.router is None for t in e.targets})
            if direct:
                self._direct[stream] = tuple(direct)
        return True

    # set by the host for a Storm component (multilang, pystorm, streamparse): Storm's rule for
    # an emit whose values do not match its stream's fields; None: heronpy's, which refuses it
    storm_arity: StormArity | None = None

    def _check(self, values: Sequence[Any], stream: str, direct_task: int | None = None) -> Sequence[Any]:
        """The values to send (a Storm component's fitted to its stream's fields), or EmitError."""
        edges = self._edges.get(stream)
        if edges is None:
            raise EmitError(
                f"component '{self.component}' emitted on stream '{stream}', which it does not declare "
                f"(declared streams: {sorted(self._fields)})"
            )
        fields = self._fields[stream]
        if len(values) != len(fields):
            consumers = [e.consumer for e in edges]
            storm = self.storm_arity
            fitted = storm.fit(values, stream, fields, consumers) if storm is not None else None
            if fitted is None:
                why = f", and its consumers {consumers} would read a missing field" if storm is not None else ""
                raise EmitError(
                    f"component '{self.component}' emitted {len(values)} values on stream '{stream}', "
                    f"which declares {len(fields)} fields {list(fields)}{why}"
                )
            values = fitted
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
        return values

    def _tasks(self, edge: Edge, values: Sequence[Any], stream: str, direct_task: int | None) -> Sequence[int]:
        """Destinations of one copy on ``edge``; a direct edge takes the named task only when
        it is one of its own (``_check`` has already checked the task)."""
        if edge.router is not None:
            return edge.router.choose(values)
        return (direct_task,) if direct_task in edge.targets else ()

    def _seal(self, task: int) -> None:
        """The task's hot values become rows, so that a row appended next comes after them."""
        vals = self.hot.pop(task, None)
        if vals:
            ids = self.hot_ids.pop(task, None)
            self.pending.setdefault(task, []).extend(body_rows(None, vals, ids))

    def pending_rows(self) -> dict[int, list[Any]]:
        """What is pending per task as rows, in order (the tests' and tools' view)."""
        out = {t: expand_runs(list(rows)) for t, rows in self.pending.items() if rows}
        for t, vals in self.hot.items():
            if vals:
                out.setdefault(t, []).extend(body_rows(None, vals, self.hot_ids.get(t)))
        return out

    def discard(self) -> None:
        """Drops every tuple not sent yet (a restore rolls back the run that emitted them)."""
        self.pending.clear()
        self.hot.clear()
        self.hot_ids.clear()
        self._flushed += self._count
        self._count = 0

    @property
    def emitted(self) -> int:
        """Tuples emitted so far (sent or still pending)."""
        return self._flushed + self._count

    def _add(self, task: int, row: Any) -> None:
        if self.hot:
            self._seal(task)
        lst = self.pending.get(task)
        if lst is None:
            self.pending[task] = [row]
        else:
            lst.append(row)

    def emit_root(self, values: Sequence[Any], stream: str, direct_task: int | None, need_task_ids: bool,
                  root: int) -> tuple[list[int] | None, int]:
        """A spout's tracked emit: every copy gets a random 64-bit id descending from ``root``.
        Returns (task ids if asked, XOR of the copies' ids); an XOR of 0 means no copy was sent."""
        values = self._check(values, stream, direct_task)
        edges = self._edges[stream]
        me = self.task_id
        xor = 0
        sent: list[int] | None = [] if need_task_ids else None
        for edge in edges:
            tasks = self._tasks(edge, values, stream, direct_task)
            for t in tasks:
                k = self._edge()
                xor ^= k
                if stream == "default":
                    self._add_hot_tracked(t, values, me, root, k)
                else:
                    self._add(t, (stream, values, ((me, root, k),)))
            if sent is not None:
                sent.extend(tasks)
        if xor:
            self.ack_log.add_init(me, root, xor)
        if stream != "default":
            self.emitted_by_stream[stream] = self.emitted_by_stream.get(stream, 0) + 1
        self._counted()
        return sent, xor

    def _add_hot_tracked(self, task: int, values: Sequence[Any], spout_task: int, root: int, key: int) -> None:
        """A tracked tuple of the default stream with one root: among the task's hot values, its
        id triple in the flat id list (one array on the wire, not a tuple of ids per row), as the
        anchored hot path adds them. Hot values without ids (at most once) become rows first."""
        ids = self.hot_ids.get(task)  # set, cleared and sealed with the task's hot values
        if ids is None:
            if task in self.hot:
                self._seal(task)
            self.hot[task] = [values]
            self.hot_ids[task] = ids_of(spout_task, root, key)
            return
        self.hot[task].append(values)
        add_ids(ids, spout_task, root, key)

    def emit_anchored(self, values: Sequence[Any], stream: str, direct_task: int | None, need_task_ids: bool,
                      anchors: Sequence[Any]) -> list[int] | None:
        """A bolt's anchored emit (Storm's scheme): for each copy and each anchor a fresh edge id
        is XORed into the anchor's ack value and into the copy's id for each of its roots."""
        one: Any = None
        if stream == "default" and direct_task is None and len(anchors) == 1:
            a = anchors[0]
            one = a[ROOTS] if type(a) is TrackedTuple else None  # its roots field, by index
        values = self._check(values, stream, direct_task)
        edges = self._edges[stream]
        sent: list[int] | None = [] if need_task_ids else None
        if type(one) is Root:
            # one anchor of one root on "default", whatever the grouping (a shuffle to a sink):
            # each copy among its task's hot values with its (spout task, root id, edge) triple
            # in the flat id array, as the fields-grouped closure (anchored_default_emit) adds
            # them, instead of a row with a tuple of triples built per copy; the same edges are
            # drawn in the same order as below
            hot, hot_ids, edge_ids = self.hot, self.hot_ids, self._edge_ids
            for edge in edges:
                tasks = self._tasks(edge, values, stream, None)
                for t in tasks:
                    flat = hot_ids.get(t)
                    if flat is None:
                        if t in hot:  # untracked hot values first become rows: order is kept
                            self._seal(t)
                        hot[t] = [values]
                        hot_ids[t] = new_ids(one, edge_ids)
                    else:
                        hot[t].append(values)
                        anchor(flat, one, edge_ids)
                if sent is not None:
                    sent.extend(tasks)
            self._counted()
            return sent
        draw = self._edge
        for edge in edges:
            tasks = self._tasks(edge, values, stream, direct_task)
            for t in tasks:
                ids: dict[tuple[int, int], int] = {}
                for a in anchors:
                    if not a.roots:
                        continue
                    e = draw()
                    a.ack_val ^= e  # a Root's own when the anchor has one root (TrackedTuple.ack_val)
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
        if kind == ACK_FAIL:
            fails = self.fails.get(spout_task)
            if fails is None:
                self.fails[spout_task] = [root]
            else:
                fails.append(root)
            return
        merged = self._acks.get(spout_task)
        if merged is None:
            self._acks[spout_task] = {root: value}
        else:
            merged[root] = merged.get(root, 0) ^ value

    def ack(self, tup: Any) -> None:
        """Acks a received tracked tuple: per root, its id XOR the edges it gave its children
        (its ack value as it is now: an emit anchored to it later changes nothing the ack
        carried; as in Storm, that child's edge is never acked and the tree times out)."""
        self.ack_log.ack(tup)

    @property
    def acks(self) -> dict[int, dict[int, int]]:
        """The init and ack records to send at the next flush, per spout task: root -> XOR
        value (the tests' and tools' view: the ack log's records move into the dict, where a
        flush sends them as well as it sends the log's bodies)."""
        for task, body in self.ack_log.drain().items():
            for kind, root, value in ACK_RECORD.iter_unpack(body):
                self.ack_record(task, kind, root, value)
        return self._acks

    def fail(self, tup: Any) -> None:
        for (rt, rid, _) in tup.roots:
            self.ack_record(rt, ACK_FAIL, rid, 0)

    def _counted(self) -> None:
        self._count += 1
        if self._count >= self.batch_size:
            self.flush()

    def emit(self, values: Sequence[Any], stream: str, direct_task: int | None,
             need_task_ids: bool) -> list[int] | None:
        """An untracked emit: the hot path, kept to one dict lookup and one route per edge."""
        edges = self._edges.get(stream)
        if edges is None or len(values) != self._nfields[stream] or stream in self._direct:
            values = self._check(values, stream, direct_task)  # raises if bad; checks a direct task
        assert edges is not None
        row = (stream, values)
        pending = self.pending
        hot = self.hot
        sent: list[int] | None = [] if need_task_ids else None
        for edge in edges:
            router = edge.router
            tasks = router.choose(values) if router is not None else self._tasks(edge, values, stream, direct_task)
            for t in tasks:
                if hot:
                    self._seal(t)
                lst = pending.get(t)
                if lst is None:
                    pending[t] = [row]
                else:
                    lst.append(row)
            if sent is not None:
                sent.extend(tasks)
        if stream != "default":
            self.emitted_by_stream[stream] = self.emitted_by_stream.get(stream, 0) + 1
        self._count += 1
        if self._count >= self.batch_size:
            self.flush()
        return sent

    def emit_many(self, values_list: Sequence[Sequence[Any]], stream: str) -> None:
        """Untracked emits of many tuples on one stream, in order: what ``emit`` per tuple does,
        with the stream's lookups and checks made once (a batch-processing bolt's outputs)."""
        edges = self._edges.get(stream)
        if edges is None or stream in self._direct:
            for values in values_list:
                self.emit(values, stream, None, False)  # raises for an undeclared stream
            return
        nfields = self._nfields[stream]
        if self.storm_arity is not None:  # a Storm component's values fitted first (or refused)
            values_list = [v if len(v) == nfields else self._check(v, stream) for v in values_list]
        routers = [e.router for e in edges if e.router is not None]
        chosen: Iterable[Sequence[int]] | None = None
        if len(routers) == 1:
            # one consumer (a repartition, a keyed operator): its tasks for the whole batch in
            # one call, then one loop that only appends. A grouping that raises is asked again
            # per tuple, so what went out before the bad tuple goes out as it did
            try:
                chosen = choose_many(routers[0], values_list)
            except Exception:
                chosen = None
        if chosen is None:
            chosen = _choose_each(values_list, nfields, [r.choose for r in routers], lambda v: self._check(v, stream))
        self._append_runs(values_list, chosen, stream, None, nfields)

    def _append_runs(self, values_list: Sequence[Any], chosen: Iterable[Any], stream: str, kind: int | None,
                     nfields: int) -> None:
        """Each tuple appended to the tasks chosen for it (a sequence of task ids, or one id), in
        order, into a run of the stream per task (the stream named once per run on the wire, not
        per tuple): its values (``kind`` None, each checked against ``nfields``), or its one value
        bare (``kind`` ONE). A run is cut at the batch size.

        The tuples go in stretches that end where the batch fills, so the loop per tuple holds no
        count and no flush test; a single task id is appended to without a one-task tuple to
        loop over (most routing answers one task)."""
        runs: dict[int, list[Any]] = {}
        run_for = self._run_for
        batch_size = self.batch_size
        count = self._count
        pairs = zip(values_list, chosen, strict=True)
        left = len(values_list)
        while left > 0:
            stretch = min(left, max(batch_size - count, 1))
            for values, tasks in islice(pairs, stretch):
                if kind is None and len(values) != nfields:
                    self._check(values, stream)  # raises
                if type(tasks) is int:
                    run = runs.get(tasks)
                    if run is None:
                        run = runs[tasks] = run_for(tasks, stream, kind)
                    run.append(values)
                    continue
                for t in tasks:
                    run = runs.get(t)
                    if run is None:
                        run = runs[t] = run_for(t, stream, kind)
                    run.append(values)
            left -= stretch
            count += stretch
            if count >= batch_size:
                self._count = count
                self.flush()
                runs.clear()  # sent: the next tuples start new runs
                count = 0
        next(pairs, None)  # strict: a choice left over (more answers than tuples) raises here
        self._count = count
        if stream != "default":
            self.emitted_by_stream[stream] = self.emitted_by_stream.get(stream, 0) + len(values_list)

    def emit_one_many(self, values: Sequence[Any], stream: str) -> None:
        """``emit_many`` for a one-field stream, each tuple given as its one value: no tuple is
        built per value, and the values go on the wire bare (a ``ONE`` run, serialization.py).
        The routing is the consumer's batch choice for bare values when it has one (the Streamlet
        repartition's), else its choice per tuple as ``emit_many`` makes it. A stream with more
        than one field or consumer, a direct or undeclared stream, or a Storm component's output,
        goes through ``emit_many`` (its checks and errors) with the values as one-value tuples."""
        edges = self._edges.get(stream)
        if (edges is None or stream in self._direct or self._nfields[stream] != 1 or self.storm_arity is not None
                or len(edges) != 1 or edges[0].router is None):
            self.emit_many(list(zip(values)), stream)
            return
        router = edges[0].router
        one_many = getattr(router, "choose_one_many", None)
        chosen: Sequence[Any] | None = None
        try:
            if one_many is not None:
                chosen = one_many(values)
            if chosen is None:
                chosen = choose_many(router, list(zip(values)))
        except Exception:
            # asked again per tuple there: what went out before the bad value goes out as it did
            self.emit_many(list(zip(values)), stream)
            return
        self._append_runs(values, chosen, stream, ONE, 1)

    def _run_for(self, task: int, stream: str, kind: int | None = None) -> list[Any]:
        """The values list of the run of ``stream`` that ends what is pending for ``task``: the
        last one when it is that stream's and of that kind (None: value lists; ONE: bare
        values), else a new one (after the task's hot values, which become rows first, so the
        order of the task's tuples stays the emit order)."""
        if self.hot:
            self._seal(task)
        lst = self.pending.get(task)
        if lst is None:
            lst = self.pending[task] = []
        elif lst:
            last = lst[-1]
            if len(last) == RUN_LEN and last[0] == stream and last[2] == kind:
                return last[3]  # type: ignore[no-any-return]
        run: list[Any] = []
        lst.append((stream, None, kind, run))
        return run

    def emit_root_many(self, values_list: Sequence[Sequence[Any]], stream: str, roots: Sequence[int]) -> list[int]:
        """``emit_root`` for each tuple of ``values_list`` with the root of the same index, in
        order, on one stream: the stream's lookups and checks once per batch (a broker spout's
        read of hundreds of records). Returns the XOR of each tuple's copies (0: no copy sent)."""
        xors: list[int] = []
        self._emit_rooted(values_list, stream, roots, 0, xors)
        return xors

    def emit_root_run(self, values_list: Sequence[Sequence[Any]], stream: str, root: int) -> int:
        """Every tuple of ``values_list`` under the one root ``root``: one tuple tree, one entry
        at the tracker, one result. Returns the XOR of all their copies (0: no copy sent).

        The root's init goes into the ack log once, after the last tuple, as one record holding
        the XOR of every copy: the tracker resolves a root when its value comes back to zero, so
        an init split over two records would let the first part's acks complete the root while
        later tuples were still in flight. A flush inside the run (the batch size reached) sends
        tuples before the init: their acks may reach the tracker first, and it XORs them into a
        new entry, which the init then completes (tracker.py: INIT and ACK are one operation)."""
        if not root:
            raise ValueError("emit_root_run: a root id is nonzero, found 0")
        xor = self._emit_rooted(values_list, stream, (), root, None)
        if xor:
            self.ack_log.add_init(self.task_id, root, xor)
        return xor

    def _emit_rooted(self, values_list: Sequence[Sequence[Any]], stream: str, roots: Sequence[int], run_root: int,
                     xors: list[int] | None) -> int:
        """The loop of ``emit_root_many`` (``xors`` a list: a root per tuple from ``roots``, an
        init per tuple, each tuple's XOR appended to ``xors``) and of ``emit_root_run`` (``xors``
        None: every tuple under ``run_root``, no init; returns the XOR of every copy)."""
        if not values_list:
            return 0
        append = None if xors is None else xors.append
        if append is not None and len(roots) != len(values_list):
            raise ValueError(f"emit_root_many: {len(values_list)} tuples and {len(roots)} roots; one root per tuple")
        edges = self._edges.get(stream)
        if edges is None or stream in self._direct:
            # an undeclared stream, or a direct one (a batch names no task): _check refuses both
            self._check(values_list[0], stream)
            return 0
        nfields = self._nfields[stream]
        # all checked before any is sent: a refused batch sends nothing (a Storm component's are fitted)
        bad = [i for i, values in enumerate(values_list) if len(values) != nfields]
        if bad:
            fitted = list(values_list)
            for i in bad:
                fitted[i] = self._check(fitted[i], stream)
            values_list = fitted
        chooses = [e.router.choose for e in edges if e.router is not None]
        me = self.task_id
        draw = self._edge
        add_init = self.ack_log.add_init
        pending = self.pending
        hot = self.hot
        to_hot = stream == "default"  # there, each copy's id triple goes in the flat id list
        add_hot = self._add_hot_tracked
        batch_size = self.batch_size
        count = self._count
        total = 0
        root = run_root
        it = None if append is None else iter(roots)
        for values in values_list:
            if it is not None:
                root = next(it)
            xor = 0
            for choose in chooses:  # one router per consuming component
                for t in choose(values):
                    k = draw()
                    xor ^= k
                    if to_hot:
                        add_hot(t, values, me, root, k)
                        continue
                    row = (stream, values, ((me, root, k),))
                    if hot:
                        self._seal(t)
                    lst = pending.get(t)
                    if lst is None:
                        pending[t] = [row]
                    else:
                        lst.append(row)
            if append is None:
                total ^= xor
            else:
                if xor:
                    add_init(me, root, xor)
                append(xor)
            count += 1
            if count >= batch_size:
                self._count = count
                self.flush()
                count = 0
        self._count = count
        if stream != "default":
            self.emitted_by_stream[stream] = self.emitted_by_stream.get(stream, 0) + len(values_list)
        return total

    def _fields_fast_path(self) -> _FastRoute | None:
        """(field index, field count, routing cache get, choose) when "default" has one consumer
        that routes by one field (fields grouping): the case the closures below inline."""
        edges = self._edges.get("default")
        if edges is None or len(edges) != 1 or not isinstance(edges[0].router, FieldsRouter):
            return None
        router = edges[0].router
        idx = router.single_index
        if idx is None:
            return None
        return idx, self._nfields["default"], router.cache.get, router.choose

    def default_stream_emit(self) -> Callable[..., list[int] | None] | None:
        """A closure for the hot case: an untracked emit on "default" whose only consumer
        routes by one field (fields grouping). It inlines the routing cache and the batch
        append, saving two Python calls per tuple (the profile's largest cost in a split bolt).
        None when the case does not apply; callers then use ``emit``."""
        fast = self._fields_fast_path()
        if fast is None:
            return None
        idx, nfields, cache_get, choose = fast
        hot = self.hot  # flush() clears it in place, so this reference stays valid
        hot_get = hot.get
        batch_size = self.batch_size
        slow = self.emit

        # heronpy's Bolt.emit signature, so it can be bound as the user's ``emit`` directly
        def emit_default(values: Sequence[Any], stream: str = "default", anchors: Any = None,
                         direct_task: int | None = None, need_task_ids: bool = False) -> list[int] | None:
            if stream != "default" or need_task_ids or direct_task is not None:
                return slow(values, stream, direct_task, need_task_ids)
            if len(values) != nfields:
                values = self._check(values, "default")  # raises, or fits a Storm component's
            key = values[idx]
            hit = cache_get(key) if type(key) is str else None
            t = hit[0] if hit is not None else choose(values)[0]
            lst = hot_get(t)
            if lst is None:
                hot[t] = [values]
            else:
                lst.append(values)
            c = self._count + 1
            self._count = c
            if c >= batch_size:
                self.flush()
            return None

        return emit_default

    def spout_tracked_emit(self, slow: Callable[..., list[int] | None], new_root: Callable[[], int],
                           emitted: Callable[[int, Any, int], None]) -> Callable[..., list[int] | None] | None:
        """At least once, a spout's emit with a message id on "default" whose consumers all
        route (no direct grouping): ``emit_root`` inlined for that case, as heronpy's Spout.emit
        signature (``slow`` takes any other call: no message id, another stream, a direct
        task, task ids asked for, a wrong arity). ``new_root`` draws the root; ``emitted``
        hands (root, message id, XOR of the copies' ids) to the spout's reliability."""
        edges = self._edges.get("default")
        if edges is None or "default" in self._direct or any(e.router is None for e in edges):
            return None
        chooses = [e.router.choose for e in edges if e.router is not None]
        nfields = self._nfields["default"]
        me = self.task_id
        draw = self._edge
        add_init = self.ack_log.add_init
        add_hot = self._add_hot_tracked
        batch_size = self.batch_size

        def spout_emit(values: Sequence[Any], tup_id: Any = None, stream: str = "default",
                       direct_task: int | None = None, need_task_ids: bool = False) -> list[int] | None:
            if tup_id is None or stream != "default" or direct_task is not None or need_task_ids \
                    or len(values) != nfields:
                return slow(values, tup_id, stream, direct_task, need_task_ids)
            root = new_root()
            xor = 0
            for choose in chooses:
                for t in choose(values):
                    k = draw()
                    xor ^= k
                    add_hot(t, values, me, root, k)
            if xor:
                add_init(me, root, xor)
            c = self._count + 1
            self._count = c
            if c >= batch_size:
                self.flush()
            emitted(root, tup_id, xor)
            return None

        return spout_emit

    def anchored_default_emit(self, slow: Callable[..., list[int] | None]) -> Callable[..., list[int] | None] | None:
        """At least once, the same hot case for a bolt's emit anchored to one input tuple of one
        root (a split bolt's ``emit([w], anchors=[tup])``): a fresh edge id is XORed into the
        anchor's ack value and given to the copy, as ``emit_anchored`` does. Any other call
        goes to ``slow`` (heronpy's whole emit path: auto_anchor, no anchor, several anchors or
        roots, other streams). None when the routing case does not apply."""
        fast = self._fields_fast_path()
        if fast is None:
            return None
        idx, nfields, cache_get, choose = fast
        hot, hot_ids = self.hot, self.hot_ids
        hot_get = hot.get
        batch_size = self.batch_size
        edge_ids = self._edge_ids

        def emit_anchored_default(values: Sequence[Any], stream: str = "default", anchors: Any = None,
                                  direct_task: int | None = None, need_task_ids: bool = False) -> list[int] | None:
            if (stream != "default" or need_task_ids or direct_task is not None or type(anchors) is not list
                    or len(anchors) != 1 or len(values) != nfields):
                return slow(values, stream, anchors, direct_task, need_task_ids)
            a = anchors[0]
            roots = a[ROOTS] if type(a) is TrackedTuple else None  # its roots field, by index
            if type(roots) is not Root:  # several roots, or none: the general path
                return slow(values, stream, anchors, direct_task, need_task_ids)
            key = values[idx]
            hit = cache_get(key) if type(key) is str else None
            t = hit[0] if hit is not None else choose(values)[0]
            lst = hot_get(t)
            if lst is None:
                hot[t] = [values]
                hot_ids[t] = new_ids(roots, edge_ids)
            else:
                lst.append(values)
                anchor(hot_ids[t], roots, edge_ids)
            c = self._count + 1
            self._count = c
            if c >= batch_size:
                self.flush()
            return None

        return emit_anchored_default

    def flush(self) -> None:
        """Encodes what is pending into frames, none over the frame limit: a batch whose
        pickle is too large is split in halves until each part fits. A single tuple that
        does not fit alone is refused with EmitError (after the other frames went out), since
        every receiver would close the connection on it."""
        if not self._count and not self._acks and not self.fails and not self.ack_log:
            return
        src = self.task_id
        frames: list[bytes] = []
        if self.fails:
            for dest, roots in self.fails.items():
                self._ack_frames(dest, ACK_FAIL, roots, repeat(0), frames)
            self.fails = {}
        if self._acks:
            # before the tuples: a root's init reaches its stream manager before any ack of it
            for dest, merged in self._acks.items():
                self._ack_frames(dest, ACK_ACK, list(merged), list(merged.values()), frames)
            self._acks = {}
        if self.ack_log:
            for dest, body in self.ack_log.drain().items():
                ack_body_frames(dest, self.task_id, body, self.max_body, frames)
        oversized: list[tuple[int, Any, int]] = []
        pending, hot = self.pending, self.hot
        for dest, rows in pending.items():
            vals = hot.get(dest)
            if rows or vals:
                self._encode(dest, rows, vals, self.hot_ids.get(dest), frames, oversized)
        for dest, vals in hot.items():
            if vals and dest not in pending:
                self._encode(dest, None, vals, self.hot_ids.get(dest), frames, oversized)
        pending.clear()
        hot.clear()
        self.hot_ids.clear()
        self._flushed += self._count
        self._count = 0
        if frames:
            self._sink(frames)
        if oversized:
            dest, row, size = oversized[0]
            raise EmitError(oversized_message(self.component, src, row[0], dest, size, self.max_body,
                                              len(oversized)))

    def _ack_frames(self, dest: int, kind: int, roots: list[int], values: Iterable[int],
                    frames: list[bytes]) -> None:
        """ACK_BATCH frames to spout task ``dest``, each under the frame limit; ``map`` packs
        the records without a Python frame per record."""
        body = b"".join(map(ACK_RECORD.pack, repeat(kind, len(roots)), roots, values))
        ack_body_frames(dest, self.task_id, body, self.max_body, frames)

    def _encode(self, dest: int, rows: list[Any] | None, vals: list[Any] | None, ids: array[int] | None,
                frames: list[bytes], oversized: list[tuple[int, Any, int]]) -> None:
        """One destination's batch: one frame when it fits (the common case), else as rows
        split in halves by ``_encode_rows``."""
        body = dumps_body(rows, vals, ids)
        if len(body) <= self.max_body:
            count = (row_count(rows) if rows else 0) + (len(vals) if vals else 0)
            frames.append(encode_batch_frame(dest, self.task_id, body, MsgType.TUPLE_BATCH, count))
        else:
            self._encode_rows(dest, body_rows(rows, vals, ids), frames, oversized)

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
        return self._count > 0 or bool(self._acks) or bool(self.fails) or bool(self.ack_log)
