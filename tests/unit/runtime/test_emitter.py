"""The emitter's routing, batching and XOR ack ids (heron_py/runtime/emitter.py), without I/O."""

import random
from functools import reduce

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from heron_py.acking.roots import RootTable
from heron_py.api.tuple import TrackedTuple
from heron_py.common.framing import (
    ACK_ACK,
    ACK_FAIL,
    ACK_INIT,
    ACK_RECORD,
    BATCH_HEADER,
    BODY_OFFSET,
    HEADER_SIZE,
    RESULT_ACKED,
    RESULT_RECORD,
    FrameDecoder,
    MsgType,
    frame_type,
)
from heron_py.common.serialization import loads_batch
from heron_py.planner.grouping import RoutingError
from heron_py.planner.model import (
    ComponentDef,
    ComponentKind,
    GroupingDef,
    GroupingKind,
    InputDef,
    PhysicalPlan,
    PickledRef,
    StmgrLocation,
    StreamDef,
    TopologyDef,
    TopologyState,
)
from heron_py.planner.packing import round_robin
from heron_py.runtime.emitter import EmitError, Emitter
from heron_py.runtime.tracked import GOLDEN, Edges, received_roots

MASK64 = (1 << 64) - 1


# --- plan and frame helpers ---------------------------------------------------------------


def _comp(name, kind, par, inputs=(), outputs=()):
    return ComponentDef(name, kind, PickledRef(b""), f"tests:{name}", par, tuple(inputs), tuple(outputs))


def _inp(component, stream, kind, fields=()):
    return InputDef(component, stream, GroupingDef(kind, tuple(fields)))


def _plan(components, containers=1):
    topo = TopologyDef("t", tuple(components))
    packing = round_robin(topo, containers)
    stmgrs = tuple(StmgrLocation(c, "localhost", 0, 0) for c in range(containers))
    return PhysicalPlan(topo, packing, stmgrs, TopologyState.RUNNING, 1)


def main_plan():
    """s (task 1) -> b1 (tasks 2, 3; fields on word), b2 (tasks 4, 5, 6; all on default,
    shuffle on 'other', direct on 'd')."""
    s = _comp("s", ComponentKind.SPOUT, 1, outputs=[
        StreamDef("default", ("word",)),
        StreamDef("other", ("a", "b")),
        StreamDef("d", ("n",), direct=True),
    ])
    b1 = _comp("b1", ComponentKind.BOLT, 2, inputs=[_inp("s", "default", GroupingKind.FIELDS, ["word"])],
               outputs=[StreamDef("default", ("word",))])
    b2 = _comp("b2", ComponentKind.BOLT, 3, inputs=[
        _inp("s", "default", GroupingKind.ALL),
        _inp("s", "other", GroupingKind.SHUFFLE),
        _inp("s", "d", GroupingKind.DIRECT),
        _inp("b1", "default", GroupingKind.SHUFFLE),
    ])
    return _plan([s, b1, b2])


def _no_custom(data):
    raise AssertionError("no custom grouping in these plans")


def make_emitter(plan, task_id, *, batch_size=1000, seed=0):
    frames = []
    em = Emitter(plan, task_id, batch_size, frames.extend, custom_loader=_no_custom,
                 prepare_custom=lambda *a: None, rng=random.Random(seed))
    return em, frames


def decode(frames):
    """Frames -> [(type, dest, src, count, payload)], payload a list of rows or ack records."""
    out = []
    for f in frames:
        # the frames must be well formed as a stream manager reads them
        assert FrameDecoder("test").feed(f) == [(frame_type(f), f)]
        dest, src, count = BATCH_HEADER.unpack_from(f, HEADER_SIZE)
        body = f[BODY_OFFSET:]
        if frame_type(f) == MsgType.ACK_BATCH:
            payload = list(ACK_RECORD.iter_unpack(body))
        else:
            assert frame_type(f) == MsgType.TUPLE_BATCH
            payload = loads_batch(body)
        assert count == len(payload)
        out.append((frame_type(f), dest, src, count, payload))
    return out


def tracked(row, ack_val=0):
    """A received tuple as the host makes it: a row's one root as a Root, several as a tuple."""
    stream, values, roots = row
    t = TrackedTuple(None, "x", stream, 0, values, 0.0, received_roots(roots))
    t.ack_val = ack_val
    return t


def xor_all(values):
    return reduce(lambda a, b: a ^ b, values, 0)


# --- emit_root ----------------------------------------------------------------------------


def test_emit_root_gives_each_copy_a_random_id_and_returns_their_xor():
    em, _ = make_emitter(main_plan(), 1)
    sent, xor = em.emit_root(["w"], "default", None, True, 777)
    assert len(sent) == 4  # one b1 task by fields, all three b2 tasks
    assert sent[1:] == [4, 5, 6] and sent[0] in (2, 3)
    ids = []
    for task in sent:
        [row] = em.pending_rows()[task]  # the hot values with their id triples, as rows
        stream, values, roots = row
        assert (stream, values) == ("default", ["w"])
        [(spout_task, root, k)] = roots
        assert (spout_task, root) == (1, 777)
        assert 0 < k <= MASK64
        ids.append(k)
    assert len(set(ids)) == 4
    assert xor == xor_all(ids) != 0
    assert em.acks == {1: {777: xor}}
    assert em.emitted == 1 and em.emitted_by_stream == {}


def test_tracked_default_stream_copies_travel_as_values_with_an_id_array_in_emit_order():
    """A spout's tracked copies on "default" go out as the hot body (values, one flat id array),
    after the task's rows and after untracked hot values, which become rows first; on the wire
    each tuple carries its one root (decode: the rows as a receiver reads them)."""
    em, frames = make_emitter(main_plan(), 1)
    em.emit(["a"], "default", None, False)  # untracked: a row to each task
    em.hot[4] = [["h"]]  # untracked hot values (an at-most-once fast path's), no ids
    _, x1 = em.emit_root(["w"], "default", None, False, 777)
    [x2, x3] = em.emit_root_many([["v"], ["u"]], "default", [778, 779])
    assert 0 not in (x1, x2, x3)
    rows = em.pending_rows()[4]
    assert [(r[0], r[1]) for r in rows] == [("default", ["a"]), ("default", ["h"]), ("default", ["w"]),
                                            ("default", ["v"]), ("default", ["u"])]
    assert [r[2][0][:2] for r in rows[2:]] == [(1, 777), (1, 778), (1, 779)] and len(rows[0]) == len(rows[1]) == 2
    assert 4 in em.hot and len(em.hot_ids[4]) == 9  # the tracked ones stayed hot: three id triples
    em.flush()
    [(_, _, _, _, wire)] = [d for d in decode(frames) if d[0] == MsgType.TUPLE_BATCH and d[1] == 4]
    assert [(r[1], r[2][0][:2] if len(r) > 2 and r[2] else None) for r in wire] == [
        (["a"], None), (["h"], None), (["w"], (1, 777)), (["v"], (1, 778)), (["u"], (1, 779))]


def test_emit_root_without_task_ids_and_on_another_stream():
    em, _ = make_emitter(main_plan(), 1)
    sent, xor = em.emit_root([1, 2], "other", None, False, 5)
    assert sent is None
    [task] = em.pending
    assert task in (4, 5, 6)
    [(_, _, ((_, _, k),))] = em.pending[task]
    assert xor == k
    assert em.acks == {1: {5: k}}
    assert em.emitted_by_stream == {"other": 1}


def test_emit_root_ids_are_independent_of_the_root_and_differ_per_emit():
    em, _ = make_emitter(main_plan(), 1)
    _, x1 = em.emit_root(["w"], "default", None, False, 1)
    _, x2 = em.emit_root(["w"], "default", None, False, 1)
    assert x1 != x2
    # two inits of one root are one merged record: the tracker XORs them alike
    assert em.acks[1] == {1: x1 ^ x2}


@pytest.mark.parametrize("stream, rows", [("default", [["a"], ["b"], ["a"], ["c"], ["d"]]),
                                          ("other", [[1, 2], [3, 4], [5, 6], [7, 8]])])
def test_emit_root_many_is_emit_root_per_tuple(stream, rows):
    """The batch form: the same routes, copy ids, XORs, merged ack records, frames (a flush
    in the middle at the batch size included) and counts as one emit_root per tuple."""
    one, one_frames = make_emitter(main_plan(), 1, batch_size=3, seed=7)
    many, many_frames = make_emitter(main_plan(), 1, batch_size=3, seed=7)
    roots = [11, 12, 13, 14, 15][:len(rows)]
    xors_one = [one.emit_root(v, stream, None, False, r)[1] for v, r in zip(rows, roots, strict=True)]
    assert many.emit_root_many(rows, stream, roots) == xors_one
    assert many.pending_rows() == one.pending_rows()
    assert many.acks == one.acks
    assert (many.emitted, many.emitted_by_stream) == (one.emitted, one.emitted_by_stream)
    assert decode(many_frames) == decode(one_frames) and len(many_frames) > 0  # the flush at 3
    one.flush()
    many.flush()
    assert decode(many_frames) == decode(one_frames)


def test_emit_root_many_refuses_a_bad_tuple_before_sending_any():
    em, _frames = make_emitter(main_plan(), 1)
    with pytest.raises(EmitError, match="emitted 2 values on stream 'default', which declares 1 fields"):
        em.emit_root_many([["a"], ["b", "c"]], "default", [1, 2])
    assert em.pending_rows() == {} and em.acks == {} and em.emitted == 0
    with pytest.raises(EmitError, match="which it does not declare"):
        em.emit_root_many([["a"]], "nope", [1])


def _sent(frames):
    """The id triples of the tracked tuples the frames carry, and their ack records."""
    out = decode(frames)
    triples = [r[2][0] for d in out if d[0] == MsgType.TUPLE_BATCH for r in d[4] if len(r) > 2 and r[2]]
    records = [rec for d in out if d[0] == MsgType.ACK_BATCH for rec in d[4]]
    return triples, records


@pytest.mark.parametrize("stream, rows, copies", [("default", [["a"], ["b"], ["a"], ["c"], ["d"]], 4),
                                                  ("other", [[1, 2], [3, 4], [5, 6], [7, 8], [9, 0]], 1)])
def test_emit_root_run_puts_every_tuple_under_one_root_and_sends_one_init_after_the_last(stream, rows, copies):
    """A run is one tree: every copy carries the run's root, and the root's init is one record,
    the XOR of every copy's id, sent after the last tuple; the flush at the batch size (3) in the
    middle sends tuples and no init (a part of the init would let the first tuples' acks complete
    the root before the rest were done)."""
    em, frames = make_emitter(main_plan(), 1, batch_size=3, seed=3)
    x = em.emit_root_run(rows, stream, 21)
    early, early_records = _sent(frames)
    assert len(early) == 3 * copies and early_records == []
    em.flush()
    triples, records = _sent(frames)
    assert records == [(ACK_INIT, 21, x)]
    assert len(triples) == len(rows) * copies and {t[:2] for t in triples} == {(1, 21)}
    assert len({t[2] for t in triples}) == len(triples) and xor_all(t[2] for t in triples) == x
    assert em.emitted == len(rows) and em.emitted_by_stream == ({} if stream == "default" else {stream: 5})
    # no flush inside: several copies for one task in its list, in order; two runs counted
    em, frames = make_emitter(main_plan(), 1, seed=3)
    em.hot[4] = [["h"]]  # untracked hot values first: they stay ahead of the run's rows
    x1 = em.emit_root_run(rows + rows, stream, 22)
    x2 = em.emit_root_run(rows, stream, 23)
    em.flush()
    triples, records = _sent(frames)
    assert len(triples) == 3 * len(rows) * copies and records == [(ACK_INIT, 22, x1), (ACK_INIT, 23, x2)]
    assert xor_all(t[2] for t in triples if t[1] == 22) == x1
    [(_, _, _, _, wire4)] = [d for d in decode(frames) if d[0] == MsgType.TUPLE_BATCH and d[1] == 4]
    assert wire4[0][1] == ["h"] and all(r[1] in rows for r in wire4[1:])
    assert em.emitted_by_stream == ({} if stream == "default" else {stream: 15})


@pytest.mark.parametrize("run", [True, False])
def test_a_storm_component_s_batch_goes_out_fitted_to_its_stream_s_fields(run):
    """A Storm component (StormArity) emitting more values than its stream declares: each tuple
    of a batch goes out with the declared fields' values, as a single emit's does."""
    import logging

    from heron_py.runtime.emitter import StormArity

    em, frames = make_emitter(main_plan(), 1, seed=4)
    em.storm_arity = StormArity(logging.getLogger("test"), "s", 1)
    rows = [[1, 2, "extra"], [3, 4], [5, 6, "more", "values"]]
    if run:
        em.emit_root_run(rows, "other", 30)
    else:
        em.emit_root_many(rows, "other", [30, 31, 32])
    em.flush()
    sent = [r[1] for d in decode(frames) if d[0] == MsgType.TUPLE_BATCH for r in d[4]]
    assert sorted(sent) == [[1, 2], [3, 4], [5, 6]] and em.storm_arity.mismatches == {"other": 2}


def test_a_run_s_root_completes_once_every_tuple_is_acked_whether_acks_come_before_its_init():
    """At the tracker: acks of half the run's tuples before the init (they were flushed first)
    leave the root live, so does the init, and the last ack completes it, once."""
    em, frames = make_emitter(main_plan(), 1, batch_size=2, seed=5)
    x = em.emit_root_run([["a"], ["b"], ["c"], ["d"]], "default", 33)
    em.flush()
    edges = [t[2] for t in _sent(frames)[0]]
    table, results = RootTable(3), bytearray()

    def apply(kind, value):
        table.apply(ACK_RECORD.pack(kind, 33, value), results)

    half = len(edges) // 2
    for e in edges[:half]:
        apply(ACK_ACK, e)
    assert results == b"" and table.live == 1
    apply(ACK_INIT, x)
    for e in edges[half:-1]:
        apply(ACK_ACK, e)
    assert results == b"" and table.live == 1
    apply(ACK_ACK, edges[-1])
    assert list(RESULT_RECORD.iter_unpack(results)) == [(RESULT_ACKED, 33)] and table.live == 0


def test_emit_root_run_with_no_consumer_and_its_refusals():
    s = _comp("s", ComponentKind.SPOUT, 1, outputs=[StreamDef("default", ("x",)), StreamDef("lonely", ("y",))])
    b = _comp("b", ComponentKind.BOLT, 1, inputs=[_inp("s", "default", GroupingKind.SHUFFLE)])
    em, frames = make_emitter(_plan([s, b]), 1)
    assert em.emit_root_run([[1], [2]], "lonely", 99) == 0
    em.flush()
    assert frames == [] and em.emitted == 2
    with pytest.raises(ValueError, match="emit_root_run: a root id is nonzero, found 0"):
        em.emit_root_run([[1]], "default", 0)
    with pytest.raises(EmitError, match="emitted 2 values on stream 'default', which declares 1 fields"):
        em.emit_root_run([[1], [2, 3]], "default", 5)
    assert em.pending_rows() == {} and em.acks == {}
    with pytest.raises(ValueError, match="emit_root_many: 2 tuples and 1 roots; one root per tuple"):
        em.emit_root_many([[1], [2]], "default", [5])
    em, _ = make_emitter(main_plan(), 1)
    for emit in (lambda rows: em.emit_root_run(rows, "d", 5), lambda rows: em.emit_root_many(rows, "d", [5, 6])):
        with pytest.raises(EmitError, match="emitted on stream 'd' without direct_task, but 'b2' subscribes"):
            emit([[1], [2]])
        with pytest.raises(EmitError, match="emitted on stream 'nope', which it does not declare"):
            em.emit_root_run([[1]], "nope", 5)
    assert em.pending_rows() == {} and em.acks == {} and em.emitted == 0


def test_emit_root_is_deterministic_for_a_seeded_rng():
    a, _ = make_emitter(main_plan(), 1, seed=42)
    b, _ = make_emitter(main_plan(), 1, seed=42)
    c, _ = make_emitter(main_plan(), 1, seed=43)
    ra = [a.emit_root(["w"], "default", None, False, 9)[1] for _ in range(3)]
    rb = [b.emit_root(["w"], "default", None, False, 9)[1] for _ in range(3)]
    rc = [c.emit_root(["w"], "default", None, False, 9)[1] for _ in range(3)]
    assert ra == rb != rc


def test_emit_root_with_no_consumer_returns_zero_and_records_no_init():
    s = _comp("s", ComponentKind.SPOUT, 1, outputs=[StreamDef("default", ("x",)), StreamDef("lonely", ("y",))])
    b = _comp("b", ComponentKind.BOLT, 1, inputs=[_inp("s", "default", GroupingKind.SHUFFLE)])
    em, frames = make_emitter(_plan([s, b]), 1)
    sent, xor = em.emit_root([1], "lonely", None, True, 99)
    assert (sent, xor) == ([], 0)
    assert em.acks == {}
    assert em.pending == {}
    assert em.emitted == 1 and em.emitted_by_stream == {"lonely": 1}
    em.flush()
    assert frames == []  # nothing to send: no copy, no init


def test_an_edge_id_is_never_zero():
    """An id of 0 would make its copy invisible to the XOR: a zero draw of the generator is
    skipped. The seed below makes the first draw zero (splitmix64 gives 0 from one state)."""
    class ZeroFirst(random.Random):
        def getrandbits(self, k):  # the 64-bit seed only; the routers' draws stay random
            return (1 << 64) - GOLDEN if k == 64 else super().getrandbits(k)

    frames = []
    em = Emitter(main_plan(), 1, 1000, frames.extend, custom_loader=_no_custom,
                 prepare_custom=lambda *a: None, rng=ZeroFirst())
    _, xor = em.emit_root([1, 2], "other", None, False, 3)
    assert xor == Edges(0).draw() != 0  # the draw after the skipped zero
    assert em.acks == {1: {3: xor}}


# --- emit_anchored, ack, fail -------------------------------------------------------------


def test_emit_anchored_xors_a_fresh_edge_into_the_anchor_and_the_copy():
    em, _ = make_emitter(main_plan(), 2)  # a b1 task: its default goes to one b2 task (shuffle)
    anchor = tracked(("default", ["w"], ((1, 10, 0xAAAA),)))
    sent = em.emit_anchored(["v"], "default", None, True, [anchor])
    [task] = sent
    [(stream, values, roots)] = em.pending_rows()[task]
    assert (stream, values) == ("default", ["v"])
    [(rt, rid, e)] = roots
    assert (rt, rid) == (1, 10)
    assert e != 0 and anchor.ack_val == e
    # a second child: another fresh edge, XORed in as well
    em.emit_anchored(["u"], "default", None, False, [anchor])
    [u] = [r for rows in em.pending_rows().values() for r in rows if r[1] == ["u"]]
    [(_, _, e2)] = u[2]
    assert e2 not in (0, e)
    assert anchor.ack_val == e ^ e2
    assert em.acks == {}  # an anchored emit records nothing; the anchor's ack carries the edges


def test_emit_anchored_one_root_keeps_the_order_of_anchored_and_unanchored_emits_on_the_wire():
    """One anchor of one root on "default" (a shuffle to b2's three tasks here) goes among its
    task's hot values with a flat id triple; unanchored rows between them keep their places,
    and each anchored copy reaches its receiver with its own root and edge."""
    em, frames = make_emitter(main_plan(), 2)
    a = tracked(("default", ["w"], ((1, 10, 0x1),)))
    sent: dict[int, list[tuple[str, bool]]] = {}
    for i in range(12):
        anchored = i % 3 != 1
        name = f"v{i}"
        if anchored:
            [t] = em.emit_anchored([name], "default", None, True, [a])
        else:
            [t] = em.emit([name], "default", None, True)
        sent.setdefault(t, []).append((name, anchored))
    assert len(sent) == 3  # every b2 task got some of each kind
    em.flush()
    edges = []
    for _, dest, _, _, rows in decode(frames):
        if not rows or rows[0][0] != "default":
            continue
        assert [(r[1][0], bool(r[2:] and r[2])) for r in rows] == sent.pop(dest)
        for r in rows:
            if r[2:] and r[2]:
                [(rt, rid, e)] = r[2]
                assert (rt, rid) == (1, 10) and e != 0
                edges.append(e)
    assert sent == {}
    assert len(edges) == 8 == len(set(edges)) and a.ack_val == xor_all(edges)


def test_emit_anchored_one_root_after_untracked_hot_values_seals_them_first():
    """Hot values without ids (an untracked closure's) become rows before an anchored copy
    joins that task's hot values, so the copy goes out after them and they stay untracked."""
    em, _ = make_emitter(main_plan(), 2)
    a = tracked(("default", ["w"], ((1, 10, 0x1),)))
    for t in (4, 5, 6):
        em.hot[t] = [["pre"]]
    [t] = em.emit_anchored(["x"], "default", None, True, [a])
    rows = em.pending_rows()[t]
    assert rows[0] == ("default", ["pre"])
    [(stream, values, [(rt, rid, e)])] = rows[1:]
    assert (stream, values, rt, rid) == ("default", ["x"], 1, 10) and a.ack_val == e != 0


def test_emit_anchored_multi_anchor_multi_root():
    em, _ = make_emitter(main_plan(), 2)
    a = tracked(("default", ["a"], ((1, 10, 0x1), (1, 20, 0x2))))  # descends from roots 10 and 20
    b = tracked(("default", ["b"], ((1, 20, 0x3), (7, 30, 0x4))))  # roots 20 and 30 (another spout task)
    c = tracked(("default", ["c"], ()))  # untracked anchor: ignored
    [task] = em.emit_anchored(["child"], "default", None, True, [a, b, c])
    [(_, _, roots)] = em.pending[task]
    ids = {(rt, rid): v for rt, rid, v in roots}
    assert set(ids) == {(1, 10), (1, 20), (7, 30)}
    ea, eb = a.ack_val, b.ack_val
    assert ea and eb and ea != eb and c.ack_val == 0
    assert ids[(1, 10)] == ea
    assert ids[(1, 20)] == ea ^ eb
    assert ids[(7, 30)] == eb


def test_emit_anchored_without_any_rooted_anchor_sends_an_untracked_row():
    em, _ = make_emitter(main_plan(), 2)
    c = tracked(("default", ["c"], ()))
    [task] = em.emit_anchored(["x"], "default", None, True, [c])
    assert em.pending[task] == [("default", ["x"], ())]
    assert c.ack_val == 0


def test_emit_anchored_to_all_grouping_gives_each_copy_its_own_edge():
    em, _ = make_emitter(main_plan(), 1)  # the spout's default: b1 (fields) and b2 (all)
    a = tracked(("default", ["a"], ((1, 10, 0x5),)))
    sent = em.emit_anchored(["w"], "default", None, True, [a])
    assert len(sent) == 4
    edges = [em.pending_rows()[t][0][2][0][2] for t in sent]
    assert len(set(edges)) == 4
    assert a.ack_val == xor_all(edges)


def test_ack_sends_per_root_its_id_xor_ack_val():
    em, _ = make_emitter(main_plan(), 4)
    t = tracked(("default", ["w"], ((1, 10, 0xF0F0), (3, 20, 0x0FF0))), ack_val=0x1111)
    em.ack(t)
    assert em.acks == {1: {10: 0xF0F0 ^ 0x1111}, 3: {20: 0x0FF0 ^ 0x1111}}
    untracked = tracked(("default", ["w"], ()))
    em.ack(untracked)
    assert em.acks == {1: {10: 0xF0F0 ^ 0x1111}, 3: {20: 0x0FF0 ^ 0x1111}}
    # a second ack of the same root before the flush merges into its record
    em.ack(tracked(("default", ["v"], ((1, 10, 0x0303),))))
    assert em.acks == {1: {10: 0xF0F0 ^ 0x1111 ^ 0x0303}, 3: {20: 0x0FF0 ^ 0x1111}}


def test_acks_merge_per_root_whether_or_not_a_root_s_acks_come_in_a_run():
    # a run of one root's acks is XORed before it reaches the dict; a root seen again after
    # another root's run, or under another spout task, still merges into the right record
    em, _ = make_emitter(main_plan(), 4)
    acks = [(1, 10, 0x1), (1, 10, 0x2), (1, 10, 0x4), (1, 11, 0x8), (1, 10, 0x10), (3, 10, 0x20),
            (3, 10, 0x40), (1, 11, 0x80)]
    for rt, rid, v in acks:
        em.ack(tracked(("default", ["w"], ((rt, rid, v),))))
    assert em.has_pending
    assert em.acks == {1: {10: 0x1 ^ 0x2 ^ 0x4 ^ 0x10, 11: 0x8 ^ 0x80}, 3: {10: 0x20 ^ 0x40}}
    # merged once: reading again, or more acks after it, merge into the same records
    em.ack(tracked(("default", ["w"], ((1, 11, 0x100),))))
    assert em.acks == {1: {10: 0x1 ^ 0x2 ^ 0x4 ^ 0x10, 11: 0x8 ^ 0x80 ^ 0x100}, 3: {10: 0x20 ^ 0x40}}


def test_an_emit_anchored_to_a_tuple_after_its_ack_is_not_in_what_the_ack_carried():
    # Storm sends the ack at once, so a child anchored to an already-acked tuple leaves its
    # edge unacked and the tree times out; recording acks until the flush must not change that
    em, _ = make_emitter(main_plan(), 2)
    anchor = tracked(("default", ["s"], ((1, 10, 0xAB),)))
    em.emit_anchored(["y"], "default", None, False, [anchor])
    e1 = anchor.ack_val
    em.ack(anchor)
    em.emit_anchored(["z"], "default", None, False, [anchor])
    e2 = anchor.ack_val ^ e1
    assert e1 and e2
    assert em.acks == {1: {10: 0xAB ^ e1}}


def test_fail_sends_ack_fail_per_root():
    em, _ = make_emitter(main_plan(), 4)
    t = tracked(("default", ["w"], ((1, 10, 0xF0F0), (3, 20, 0x0FF0))), ack_val=0x1111)
    em.fail(t)
    assert em.fails == {1: [10], 3: [20]} and em.acks == {}


def test_a_leaf_ack_cancels_the_spout_init():
    spout, _ = make_emitter(main_plan(), 1)
    bolt, _ = make_emitter(main_plan(), 5)
    _, xor = spout.emit_root([1, 2], "other", None, False, 8)
    [rows] = spout.pending.values()
    bolt.ack(tracked(rows[0]))
    [(r1, v1)] = spout.acks[1].items()
    [(r2, v2)] = bolt.acks[1].items()
    assert (r1, r2) == (8, 8)
    assert v1 == xor and v1 ^ v2 == 0


# --- flush and frames ---------------------------------------------------------------------


def test_flush_puts_ack_batches_before_tuple_batches_and_batches_per_destination():
    em, frames = make_emitter(main_plan(), 2)
    anchor = tracked(("default", ["w"], ((1, 10, 0xAB),)))
    for i in range(6):
        em.emit([f"x{i}"], "default", None, False)
    em.emit_anchored(["y"], "default", None, False, [anchor])
    em.ack(anchor)
    em.ack(tracked(("default", ["z"], ((1, 11, 0xCD), (3, 12, 0xEF)))))
    assert em.has_pending
    assert frames == []
    em.flush()
    assert not em.has_pending and em.pending == {} and em.acks == {} and em.fails == {}
    got = decode(frames)
    kinds = [g[0] for g in got]
    n_ack = kinds.count(MsgType.ACK_BATCH)
    assert kinds == [MsgType.ACK_BATCH] * n_ack + [MsgType.TUPLE_BATCH] * (len(kinds) - n_ack)
    acks = {g[1]: g[4] for g in got if g[0] == MsgType.ACK_BATCH}
    assert acks == {1: [(ACK_ACK, 10, 0xAB ^ anchor.ack_val), (ACK_ACK, 11, 0xCD)], 3: [(ACK_ACK, 12, 0xEF)]}
    tuples = {g[1]: g[4] for g in got if g[0] == MsgType.TUPLE_BATCH}
    assert set(tuples) <= {4, 5, 6}
    assert all(g[2] == 2 for g in got)  # source task in every batch header
    # one frame per destination, the rows in emit order, every tuple once
    assert len(tuples) == kinds.count(MsgType.TUPLE_BATCH)
    rows = sorted((r for rs in tuples.values() for r in rs), key=lambda r: r[1])
    assert [r[1] for r in rows] == [[f"x{i}"] for i in range(6)] + [["y"]]
    for rs in tuples.values():
        untracked = [r[1][0] for r in rs if len(r) == 2]
        assert untracked == sorted(untracked)
    [y] = [r for r in rows if r[1] == ["y"]]
    assert y[2] == ((1, 10, anchor.ack_val),)


def test_flush_with_nothing_pending_sends_nothing():
    em, frames = make_emitter(main_plan(), 1)
    em.flush()
    assert frames == [] and not em.has_pending


def test_acks_alone_are_flushed():
    em, frames = make_emitter(main_plan(), 4)
    em.fail(tracked(("default", ["w"], ((1, 10, 0x1),))))
    assert em.has_pending
    em.flush()
    assert decode(frames) == [(MsgType.ACK_BATCH, 1, 4, 1, [(ACK_FAIL, 10, 0)])]


def test_batch_size_triggers_a_flush_and_init_goes_with_its_tuples():
    em, frames = make_emitter(main_plan(), 1, batch_size=3)
    em.emit_root([1, 2], "other", None, False, 1)
    em.emit([3, 4], "other", None, False)
    assert frames == []
    _, xor3 = em.emit_root([5, 6], "other", None, False, 3)
    got = decode(frames)
    assert got[0][0] == MsgType.ACK_BATCH
    assert [r[1] for r in got[0][4]] == [1, 3] and got[0][4][1] == (ACK_INIT, 3, xor3)
    assert sum(g[3] for g in got if g[0] == MsgType.TUPLE_BATCH) == 3
    assert not em.has_pending and em.emitted == 3


# --- the key property: XOR of a root's records is 0 exactly when its tree is acked ------------


def tree_plan():
    """s (task 1) -> b (tasks 2, 3: shuffle from s and from itself) and leaf (tasks 4, 5: all)."""
    s = _comp("s", ComponentKind.SPOUT, 1, outputs=[StreamDef("default", ("x",))])
    b = _comp("b", ComponentKind.BOLT, 2, inputs=[
        _inp("s", "default", GroupingKind.SHUFFLE),
        _inp("b", "default", GroupingKind.SHUFFLE),
    ], outputs=[StreamDef("default", ("x",))])
    leaf = _comp("leaf", ComponentKind.BOLT, 2, inputs=[
        _inp("s", "default", GroupingKind.ALL),
        _inp("b", "default", GroupingKind.ALL),
    ])
    return _plan([s, b, leaf], containers=2)


@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 2**32), nroots=st.integers(1, 3), data=st.data())
def test_xor_of_a_roots_records_is_zero_exactly_when_its_tree_is_acked(seed, nroots, data):
    plan = tree_plan()
    frames = []
    emitters = {t.task_id: Emitter(plan, t.task_id, 10_000, frames.extend, custom_loader=_no_custom,
                                   prepare_custom=lambda *a: None, rng=random.Random(seed * 31 + t.task_id))
                for t in plan.packing.tasks}
    live = {t: [] for t in emitters if t != 1}  # received and not yet acked, per task
    model = {}  # tuple label -> the roots it descends from, by the model (union of its anchors' roots)
    record_xor = {}  # root -> XOR of every ACK_INIT and ACK_ACK value recorded for it

    def pump():
        for em in emitters.values():
            em.flush()
        for kind, dest, _src, _n, payload in decode(frames):
            if kind == MsgType.ACK_BATCH:
                assert dest == 1
                for k, root, v in payload:
                    assert k in (ACK_INIT, ACK_ACK)
                    record_xor[root] = record_xor.get(root, 0) ^ v
            else:
                for r in payload:
                    assert {rid for _, rid, _ in r[2]} == model[r[1][0]]
                    live[dest].append(tracked(r))
        frames.clear()

    def check():
        for root in range(nroots):
            unacked = sum(1 for ts in live.values() for t in ts if root in model[t.values[0]])
            if unacked:
                assert record_xor.get(root, 0) != 0, f"root {root}: XOR 0 with {unacked} tuples unacked"
            else:
                assert record_xor.get(root, 0) == 0, f"root {root}: every tuple acked but XOR != 0"

    for root in range(nroots):
        model[("r", root)] = {root}
        _, xor = emitters[1].emit_root([("r", root)], "default", None, False, root)
        assert xor != 0
    pump()
    check()
    for _ in range(data.draw(st.integers(0, 25), label="steps")):
        busy = [t for t in (2, 3) if live[t]]
        if busy and data.draw(st.booleans(), label="emit?"):
            task = data.draw(st.sampled_from(busy), label="task")
            idx = data.draw(st.sets(st.integers(0, len(live[task]) - 1), min_size=1), label="anchors")
            anchors = [live[task][i] for i in sorted(idx)]
            label = ("c", len(model))
            model[label] = set().union(*(model[a.values[0]] for a in anchors))
            emitters[task].emit_anchored([label], "default", None, False, anchors)
        else:
            holders = [t for t, ts in live.items() if ts]
            if not holders:
                break
            task = data.draw(st.sampled_from(holders), label="acker")
            i = data.draw(st.integers(0, len(live[task]) - 1), label="acked")
            emitters[task].ack(live[task].pop(i))
        pump()
        check()
    # then every tuple is acked, in a random order; the children of each appear as it goes
    while any(live.values()):
        task = data.draw(st.sampled_from([t for t, ts in live.items() if ts]), label="final acker")
        emitters[task].ack(live[task].pop(data.draw(st.integers(0, len(live[task]) - 1), label="final acked")))
        pump()
        check()
    assert all(record_xor.get(root, 0) == 0 for root in range(nroots))


# --- emit errors --------------------------------------------------------------------------


def _emit_error(fn, *args):
    with pytest.raises(EmitError) as e:
        fn(*args)
    return str(e.value)


@pytest.mark.parametrize("how", ["emit", "emit_root", "emit_anchored"])
def test_undeclared_stream(how):
    em, _ = make_emitter(main_plan(), 1)
    call = {"emit": lambda: em.emit(["w"], "nope", None, False),
            "emit_root": lambda: em.emit_root(["w"], "nope", None, False, 1),
            "emit_anchored": lambda: em.emit_anchored(["w"], "nope", None, False, [])}[how]
    assert _emit_error(call) == ("component 's' emitted on stream 'nope', which it does not declare "
                                 "(declared streams: ['d', 'default', 'other'])")
    assert em.pending == {} and em.acks == {} and em.emitted == 0


@pytest.mark.parametrize("how", ["emit", "emit_root", "emit_anchored"])
def test_wrong_number_of_values(how):
    em, _ = make_emitter(main_plan(), 1)
    call = {"emit": lambda: em.emit([1, 2, 3], "other", None, False),
            "emit_root": lambda: em.emit_root([1, 2, 3], "other", None, False, 1),
            "emit_anchored": lambda: em.emit_anchored([1, 2, 3], "other", None, False, [])}[how]
    assert _emit_error(call) == ("component 's' emitted 3 values on stream 'other', "
                                 "which declares 2 fields ['a', 'b']")
    assert em.pending == {} and em.acks == {} and em.emitted == 0


def test_no_values_on_a_declared_stream():
    em, _ = make_emitter(main_plan(), 1)
    assert _emit_error(em.emit, [], "default", None, False) == (
        "component 's' emitted 0 values on stream 'default', which declares 1 fields ['word']")


@pytest.mark.parametrize("how", ["emit", "emit_root"])
def test_direct_grouping_without_direct_task(how):
    em, _ = make_emitter(main_plan(), 1)
    call = {"emit": lambda: em.emit([1], "d", None, False),
            "emit_root": lambda: em.emit_root([1], "d", None, False, 1)}[how]
    assert _emit_error(call) == ("component 's' emitted on stream 'd' without direct_task, "
                                 "but 'b2' subscribes to it with direct grouping")
    assert em.pending == {} and em.acks == {}


def test_direct_emit_goes_to_the_named_task_only():
    em, _ = make_emitter(main_plan(), 1)
    assert em.emit([7], "d", 5, True) == [5]
    assert em.pending == {5: [("d", [7])]}
    sent, xor = em.emit_root([8], "d", 6, True, 44)
    assert sent == [6]
    assert em.pending[6] == [("d", [8], ((1, 44, xor),))]


def test_direct_emit_to_a_task_that_does_not_subscribe():
    em, _ = make_emitter(main_plan(), 1)
    with pytest.raises(RoutingError) as e:
        em.emit([7], "d", 2, False)
    assert str(e.value) == "direct emit to task 2, which is not one of the subscribed tasks [4, 5, 6]"
    assert em.pending == {}


def test_direct_stream_with_two_direct_subscribers():
    """Storm and Heron send a direct emit to the named task, whichever of the stream's
    subscribers it belongs to; the other subscribers get nothing."""
    s = _comp("s", ComponentKind.SPOUT, 1, outputs=[StreamDef("d", ("n",), direct=True)])
    x = _comp("x", ComponentKind.BOLT, 2, inputs=[_inp("s", "d", GroupingKind.DIRECT)])
    y = _comp("y", ComponentKind.BOLT, 2, inputs=[_inp("s", "d", GroupingKind.DIRECT)])
    em, _ = make_emitter(_plan([s, x, y]), 1)
    assert em.emit([1], "d", 2, True) == [2]  # a task of x
    assert em.emit([2], "d", 5, True) == [5]  # a task of y
    assert em.pending == {2: [("d", [1])], 5: [("d", [2])]}


# --- the default-stream fast path -------------------------------------------------------


def fields_plan(fields=("word",)):
    s = _comp("s", ComponentKind.SPOUT, 1, outputs=[StreamDef("default", ("word", "n")),
                                                   StreamDef("side", ("word", "n"))])
    c = _comp("c", ComponentKind.BOLT, 5, inputs=[_inp("s", "default", GroupingKind.FIELDS, fields),
                                                 _inp("s", "side", GroupingKind.SHUFFLE)])
    return _plan([s, c], containers=2)


def _pending_tasks(em):
    return {t: [r[1] for r in rows] for t, rows in em.pending_rows().items()}


def test_default_stream_emit_routes_as_emit():
    plan = fields_plan()
    slow, _ = make_emitter(plan, 1, batch_size=100_000)
    fast_em, _ = make_emitter(plan, 1, batch_size=100_000)
    fast = fast_em.default_stream_emit()
    assert fast is not None
    rnd = random.Random(3)
    words = [rnd.choice(["a", "bb", "ccc", "dd", "e", "ff", "g", "hhh", 7, 8.5, ("t", 1), None])
             for _ in range(500)]
    for i, w in enumerate(words):
        assert slow.emit([w, i], "default", None, False) is None
        assert fast([w, i]) is None
    assert _pending_tasks(fast_em) == _pending_tasks(slow)
    assert len(set(fast_em.pending_rows())) > 1  # the words do spread over the tasks
    assert fast_em.emitted == slow.emitted == 500
    assert fast_em.emitted_by_stream == slow.emitted_by_stream == {}
    # and the chosen task is the one each word goes to with need_task_ids
    probe, _ = make_emitter(plan, 1)
    for w in ["a", "bb", 7, None]:
        [t] = probe.emit([w, 0], "default", None, True)
        assert fast([w, 0], need_task_ids=True) == [t]


def test_default_stream_emit_falls_back_for_other_streams_and_checks_values():
    em, _ = make_emitter(fields_plan(), 1)
    fast = em.default_stream_emit()
    sent = fast(["w", 1], stream="side", need_task_ids=True)
    assert len(sent) == 1 and em.pending[sent[0]] == [("side", ["w", 1])]
    assert em.emitted_by_stream == {"side": 1}
    with pytest.raises(EmitError) as e:
        fast(["w"])
    assert str(e.value) == "component 's' emitted 1 values on stream 'default', which declares 2 fields ['word', 'n']"
    with pytest.raises(EmitError) as e:
        fast(["w", 1], stream="nope")
    assert str(e.value) == ("component 's' emitted on stream 'nope', which it does not declare "
                            "(declared streams: ['default', 'side'])")


def test_default_stream_emit_flushes_at_the_batch_size():
    em, frames = make_emitter(fields_plan(), 1, batch_size=4)
    fast = em.default_stream_emit()
    for i in range(3):
        fast([f"w{i}", i])
    assert frames == []
    fast(["w3", 3])
    got = decode(frames)
    assert sum(g[3] for g in got) == 4 and all(g[0] == MsgType.TUPLE_BATCH for g in got)
    assert em.pending_rows() == {} and not em.has_pending
    fast(["w4", 4])  # the closure's pending is still the emitter's after a flush
    assert [r for rows in em.pending_rows().values() for r in rows] == [("default", ["w4", 4])]


def test_default_stream_emit_does_not_apply():
    # two consumers on default
    assert make_emitter(main_plan(), 1)[0].default_stream_emit() is None
    # grouping on two fields
    assert make_emitter(fields_plan(("word", "n")), 1)[0].default_stream_emit() is None
    # not a fields grouping
    s = _comp("s", ComponentKind.SPOUT, 1, outputs=[StreamDef("default", ("x",))])
    b = _comp("b", ComponentKind.BOLT, 2, inputs=[_inp("s", "default", GroupingKind.SHUFFLE)])
    assert make_emitter(_plan([s, b]), 1)[0].default_stream_emit() is None
    # no default stream
    s2 = _comp("s", ComponentKind.SPOUT, 1, outputs=[StreamDef("other", ("x",))])
    b2 = _comp("b", ComponentKind.BOLT, 2, inputs=[_inp("s", "other", GroupingKind.FIELDS, ["x"])])
    assert make_emitter(_plan([s2, b2]), 1)[0].default_stream_emit() is None


# --- the anchored fast path (at least once) ------------------------------------------------


def test_anchored_default_emit_gives_the_rows_and_edges_emit_anchored_gives():
    plan = fields_plan()
    slow_em, slow_frames = make_emitter(plan, 1, batch_size=100_000, seed=5)
    fast_em, fast_frames = make_emitter(plan, 1, batch_size=100_000, seed=5)
    fell_back = []
    fast = fast_em.anchored_default_emit(lambda *a: fell_back.append(a))
    assert fast is not None
    words = ["a", "bb", 7, "ccc", None, "a"]
    for i, w in enumerate(words):
        sa = tracked(("default", [f"s{i}"], ((1, 100 + i, 0x5),)))
        fa = tracked(("default", [f"s{i}"], ((1, 100 + i, 0x5),)))
        assert slow_em.emit_anchored([w, i], "default", None, False, [sa]) is None
        assert fast([w, i], anchors=[fa]) is None
        assert fa.ack_val == sa.ack_val != 0
    assert fast_em.pending_rows() == slow_em.pending_rows()
    assert fast_em.emitted == slow_em.emitted == len(words) and fell_back == []
    # and the same tuples arrive from the two encodings (values and flat ids; rows)
    fast_em.flush()
    slow_em.flush()
    assert [g[1:] for g in decode(fast_frames)] == [g[1:] for g in decode(slow_frames)]


def test_anchored_default_emit_hands_every_other_call_to_the_full_path():
    em, _ = make_emitter(fields_plan(), 1)
    calls = []
    fast = em.anchored_default_emit(lambda *a: calls.append(a))
    two_roots = tracked(("default", ["s"], ((1, 1, 0x1), (3, 2, 0x2))))
    untracked = tracked(("default", ["s"], ()))
    one = tracked(("default", ["s"], ((1, 1, 0x1),)))
    fast(["w", 1])  # no anchor (auto_anchor is the full path's to apply)
    fast(["w", 1], anchors=[two_roots])
    fast(["w", 1], anchors=[untracked])
    fast(["w", 1], anchors=[one, one])
    fast(["w", 1], anchors=one)  # a bare tuple as anchors, which heronpy accepts
    fast(["w", 1], stream="side", anchors=[one])
    fast(["w", 1], anchors=[one], need_task_ids=True)
    fast(["w"], anchors=[one])  # wrong arity: the full path raises the one error
    assert len(calls) == 8 and em.pending_rows() == {} and one.ack_val == 0


def test_fails_go_out_before_the_merged_acks():
    em, frames = make_emitter(main_plan(), 4)
    em.ack(tracked(("default", ["w"], ((1, 10, 0x1),))))
    em.fail(tracked(("default", ["w"], ((1, 11, 0x2),))))
    em.ack(tracked(("default", ["w"], ((1, 10, 0x4),))))
    em.flush()
    assert decode(frames) == [(MsgType.ACK_BATCH, 1, 4, 1, [(ACK_FAIL, 11, 0)]),
                              (MsgType.ACK_BATCH, 1, 4, 1, [(ACK_ACK, 10, 0x1 ^ 0x4)])]


def test_a_general_emit_after_hot_values_keeps_the_order_of_one_tasks_tuples():
    em, frames = make_emitter(fields_plan(), 1, batch_size=100_000)
    fast = em.default_stream_emit()
    [t] = em.emit(["w", 0], "default", None, True)  # the task "w" goes to, through the general path
    fast(["w", 1])
    fast(["w", 2])
    em.emit(["w", 3], "default", None, False)  # the general path again, to the same task
    fast(["w", 4])
    assert [r[1][1] for r in em.pending_rows()[t]] == [0, 1, 2, 3, 4]
    em.flush()
    [(kind, dest, _, count, rows)] = decode(frames)
    assert (kind, dest, count) == (MsgType.TUPLE_BATCH, t, 5)
    assert [r[1][1] for r in rows] == [0, 1, 2, 3, 4]


def test_discard_drops_rows_and_hot_values():
    em, frames = make_emitter(fields_plan(), 1, batch_size=100_000)
    fast = em.default_stream_emit()
    fast(["a", 1])
    em.emit(["b", 2], "side", None, False)
    assert em.has_pending
    em.discard()
    assert not em.has_pending and em.pending_rows() == {}
    em.flush()
    assert frames == []


# --- the spout's tracked fast path (at least once) ------------------------------------------


def test_spout_tracked_emit_gives_the_rows_inits_and_xors_emit_root_gives():
    """Over two consumers (fields on b1, all on b2), with flushes on the batch size: the same
    copies, ids, init records and frames as emit_root, and the same (root, message id, XOR)
    handed on."""
    slow_em, slow_frames = make_emitter(main_plan(), 1, batch_size=4, seed=9)
    fast_em, fast_frames = make_emitter(main_plan(), 1, batch_size=4, seed=9)
    roots = iter(range(100, 200)).__next__
    slow_seen, fast_seen, fell_back = [], [], []
    fast = fast_em.spout_tracked_emit(lambda *a: fell_back.append(a), roots,
                                      lambda *a: fast_seen.append(a))
    assert fast is not None
    words = ["a", "bb", 7, "ccc", None, "a", "d"]
    for i, w in enumerate(words):
        root = 100 + i
        _, xor = slow_em.emit_root([w], "default", None, False, root)
        slow_seen.append((root, f"id{i}", xor))
        assert fast([w], tup_id=f"id{i}") is None
    assert fast_seen == slow_seen and fell_back == [] and all(x for _, _, x in fast_seen)
    assert fast_em.pending_rows() == slow_em.pending_rows()
    assert fast_em.emitted == slow_em.emitted == len(words)
    fast_em.flush()
    slow_em.flush()
    got = decode(fast_frames)
    assert got == decode(slow_frames)
    inits = [r for g in got if g[0] == MsgType.ACK_BATCH for r in g[4]]
    assert inits == [(ACK_INIT, root, xor) for root, _, xor in slow_seen]


def test_spout_tracked_emit_hands_every_other_call_to_the_full_path():
    em, _ = make_emitter(main_plan(), 1)
    calls = []
    fast = em.spout_tracked_emit(lambda *a: calls.append(a), lambda: 1, lambda *a: None)
    fast(["w"])  # no message id: untracked
    fast(["w"], tup_id=1, stream="other")
    fast(["w"], tup_id=1, direct_task=2)
    fast(["w"], tup_id=1, need_task_ids=True)
    fast(["w", 2], tup_id=1)  # wrong arity: the full path raises the one error
    assert [c[:3] for c in calls] == [(["w"], None, "default"), (["w"], 1, "other"), (["w"], 1, "default"),
                                      (["w"], 1, "default"), (["w", 2], 1, "default")]
    assert em.pending_rows() == {} and em.emitted == 0
    # a default stream with a direct consumer is not this path's case
    s = _comp("s", ComponentKind.SPOUT, 1, outputs=[StreamDef("default", ("n",), direct=True)])
    b = _comp("b", ComponentKind.BOLT, 2, inputs=[_inp("s", "default", GroupingKind.DIRECT)])
    assert make_emitter(_plan([s, b]), 1)[0].spout_tracked_emit(print, print, print) is None
