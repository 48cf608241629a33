"""Runs on the wire: a batch emit's tuples of one stream to one task travel as one run
``(stream, None, None, [values, ...])`` in the body's rows, the stream named once (the Streamlet
operators emit on "output", which had each tuple carry it). The order of one task's tuples stays
the emit order across runs, plain rows and the hot default-stream values; frames count every
tuple of a run; the receiving host gives each run's tuples to the bolt as rows gave them."""

from __future__ import annotations

import random
from typing import Any

from heron_py.common.framing import BATCH_HEADER, BODY_OFFSET, HEADER_SIZE, MsgType, frame_type
from heron_py.common.serialization import ONE, body_rows, dumps_body, loads_body, row_count
from heron_py.planner.model import ComponentKind, GroupingKind, StreamDef
from heron_py.runtime.emitter import Emitter
from heron_py.runtime.host import _tracked
from tests.unit.runtime.test_emitter import _comp, _inp, _no_custom, _plan


def plan() -> Any:
    """s (task 1; streams "default" and "output") -> b (task 2, all on both)."""
    s = _comp("s", ComponentKind.SPOUT, 1, outputs=[StreamDef("default", ("v",)), StreamDef("output", ("v",))])
    b = _comp("b", ComponentKind.BOLT, 1, inputs=[_inp("s", "default", GroupingKind.ALL),
                                                  _inp("s", "output", GroupingKind.ALL)])
    return _plan([s, b])


def emitter(batch_size: int = 1000, max_frame: int | None = None) -> tuple[Emitter, list[bytes]]:
    frames: list[bytes] = []
    kw = {} if max_frame is None else {"max_frame": max_frame}
    em = Emitter(plan(), 1, batch_size, frames.extend, custom_loader=_no_custom, prepare_custom=lambda *a: None,
                 rng=random.Random(0), **kw)
    return em, frames


def bodies(frames: list[bytes]) -> list[tuple[int, list[Any]]]:
    out = []
    for f in frames:
        assert frame_type(f) == MsgType.TUPLE_BATCH
        _dest, _src, count = BATCH_HEADER.unpack_from(f, HEADER_SIZE)
        rows, vals, ids = loads_body(f[BODY_OFFSET:])
        out.append((count, body_rows(rows, vals, ids)))
    return out


def test_a_batch_emit_is_one_run_per_task_and_the_stream_is_named_once():
    em, frames = emitter()
    em.emit_many([[w] for w in "abc"], "output")
    em.emit_many([[w] for w in "de"], "output")  # the same run goes on
    assert em.pending == {2: [("output", None, None, [["a"], ["b"], ["c"], ["d"], ["e"]])]}
    em.flush()
    [f] = frames
    rows, vals, ids = loads_body(f[BODY_OFFSET:])
    assert rows == [("output", None, None, [["a"], ["b"], ["c"], ["d"], ["e"]])] and vals is None and ids is None
    assert bodies(frames) == [(5, [("output", [w]) for w in "abcde"])]
    assert bytes(f[BODY_OFFSET:]).count(b"output") == 1  # the stream's name once, not per tuple


def test_the_order_of_one_tasks_tuples_is_the_emit_order_across_runs_rows_and_hot_values():
    em, frames = emitter()
    em.emit_many([["a"], ["b"]], "output")
    em.emit(["x"], "default", None, False)  # the hot default path: after the run
    em.emit_many([["c"]], "output")  # the hot value becomes a row first: a new run after it
    em.emit_many([["d"]], "default")  # a run of another stream
    em.emit(["y"], "default", None, False)
    em.flush()
    [(count, rows)] = bodies(frames)
    assert rows == [("output", ["a"]), ("output", ["b"]), ("default", ["x"]), ("output", ["c"]), ("default", ["d"]),
                    ("default", ["y"])]
    assert count == 6 and em.emitted == 6


def test_a_run_is_cut_at_the_batch_size_and_every_frame_counts_its_tuples():
    em, frames = emitter(batch_size=4)
    em.emit_many([[i] for i in range(10)], "output")
    em.flush()
    got = bodies(frames)
    assert [c for c, _ in got] == [4, 4, 2]
    assert [r for _, rows in got for r in rows] == [("output", [i]) for i in range(10)]


def test_a_run_too_large_for_one_frame_is_split_keeping_the_order():
    em, frames = emitter(max_frame=600)
    em.emit_many([["x" * 40 + str(i)] for i in range(20)], "output")
    em.flush()
    got = bodies(frames)
    assert len(got) > 1 and all(c == len(rows) for c, rows in got)
    assert [r[1][0] for _, rows in got for r in rows] == ["x" * 40 + str(i) for i in range(20)]


def test_row_count_and_tracked_see_through_runs():
    run = ("output", None, None, [[1], [2], [3]])
    assert row_count([run, ("s", [4]), run]) == 7
    assert row_count([("s", [4])]) == 1
    assert not _tracked([run], None)  # a run's tuples carry no roots
    assert _tracked([run, ("s", [4], ((1, 2, 3),))], None)
    rows, vals, ids = loads_body(dumps_body([run], [[9]], None))
    assert body_rows(rows, vals, ids) == [("output", [1]), ("output", [2]), ("output", [3]), ("default", [9])]


def test_a_one_field_batch_emit_goes_out_as_one_run_of_bare_values():
    em, frames = emitter()
    em.emit_one_many(list("abc"), "output")
    em.emit_one_many(list("de"), "output")  # the same run goes on
    assert em.pending == {2: [("output", None, ONE, list("abcde"))]}
    em.flush()
    [f] = frames
    rows, vals, ids = loads_body(f[BODY_OFFSET:])
    assert rows == [("output", None, ONE, list("abcde"))] and vals is None and ids is None
    assert bodies(frames) == [(5, [("output", (w,)) for w in "abcde"])]
    assert em.emitted == 5


def test_runs_of_bare_values_and_of_value_lists_stay_apart_in_emit_order():
    em, frames = emitter()
    em.emit_one_many(["a"], "output")
    em.emit_many([["b"]], "output")  # a run of value lists after the bare one
    em.emit_one_many(["c", "d"], "output")
    em.emit(["x"], "default", None, False)
    em.emit_one_many(["e"], "output")  # the hot value becomes a row first
    assert [r[2] if len(r) == 4 else "row" for r in em.pending[2]] == [ONE, None, ONE, "row", ONE]
    em.flush()
    [(count, rows)] = bodies(frames)
    assert rows == [("output", ("a",)), ("output", ["b"]), ("output", ("c",)), ("output", ("d",)),
                    ("default", ["x"]), ("output", ("e",))]
    assert count == 6


def test_a_run_of_bare_values_is_cut_at_the_batch_size_and_split_to_fit_a_frame():
    em, frames = emitter(batch_size=4)
    em.emit_one_many(list(range(10)), "output")
    em.flush()
    got = bodies(frames)
    assert [c for c, _ in got] == [4, 4, 2]
    assert [r for _, rows in got for r in rows] == [("output", (i,)) for i in range(10)]
    em, frames = emitter(max_frame=600)
    em.emit_one_many(["x" * 40 + str(i) for i in range(20)], "output")
    em.flush()
    got = bodies(frames)
    assert len(got) > 1 and all(c == len(rows) for c, rows in got)
    assert [r[1][0] for _, rows in got for r in rows] == ["x" * 40 + str(i) for i in range(20)]


def test_bare_values_on_a_stream_that_is_not_one_field_are_refused_as_emit_many_refuses_them():
    s = _comp("s", ComponentKind.SPOUT, 1, outputs=[StreamDef("pairs", ("k", "v"))])
    b = _comp("b", ComponentKind.BOLT, 1, inputs=[_inp("s", "pairs", GroupingKind.ALL)])
    em = Emitter(_plan([s, b]), 1, 1000, [].extend, custom_loader=_no_custom, prepare_custom=lambda *a: None,
                 rng=random.Random(0))
    errors = []
    for call in (lambda: em.emit_one_many(["a"], "pairs"), lambda: em.emit_many([("a",)], "pairs"),
                 lambda: em.emit_one_many(["a"], "nope"), lambda: em.emit_many([("a",)], "nope")):
        try:
            call()
        except Exception as e:
            errors.append((type(e).__name__, str(e)))
    assert errors[0] == errors[1] and errors[2] == errors[3] and len(errors) == 4
    assert em.emitted == 0


def test_row_count_and_tracked_see_through_runs_of_bare_values():
    run = ("output", None, ONE, [1, 2, 3])
    assert row_count([run, ("s", [4])]) == 4
    assert not _tracked([run], None)
    rows, vals, ids = loads_body(dumps_body([run], [[9]], None))
    assert body_rows(rows, vals, ids) == [("output", (1,)), ("output", (2,)), ("output", (3,)), ("default", [9])]
