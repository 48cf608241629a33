"""Emitter.emit_many's batch routing: one consumer's tasks chosen for the whole batch in one
call (a custom grouping's ``choose_tasks_many``, the Streamlet repartition and key groupings),
the same tuples to the same tasks as one ``emit`` each, and a grouping that raises still
emits the tuples before the bad one, as the per-tuple path did."""

from __future__ import annotations

import random
from typing import Any

import pytest

from heron_py.api.streamlet import functions
from heron_py.api.streamlet.groupings import KeyFunctionGrouping, RepartitionGrouping
from heron_py.planner.grouping import RoutingError, choose_many, make_router
from heron_py.planner.model import ComponentKind, GroupingDef, GroupingKind, InputDef, PickledRef, StreamDef
from heron_py.runtime.emitter import Emitter
from tests.unit.runtime.test_emitter import _comp, _plan

TARGETS = [4, 7, 9]


def custom_plan() -> Any:
    """s (task 1) -> b (tasks 2, 3, 4; a custom grouping on default)."""
    s = _comp("s", ComponentKind.SPOUT, 1, outputs=[StreamDef("default", ("n",))])
    b = _comp("b", ComponentKind.BOLT, 3, inputs=[
        InputDef("s", "default", GroupingDef(GroupingKind.CUSTOM, (), PickledRef(b"g")))])
    return _plan([s, b])


class Mod:
    """Task 2 + n % 3, per tuple and per batch; ``raise_at`` makes one value raise."""

    def __init__(self, raise_at: int | None = None, many: bool = True) -> None:
        self.targets: list[int] = []
        self.raise_at = raise_at
        self.batch_calls = 0
        if not many:
            self.choose_tasks_many = None

    def prepare(self, context: Any, component: str, stream: str, targets: list[int]) -> None:
        self.targets = sorted(targets)

    def choose_tasks(self, values: Any) -> list[int]:
        if values[0] == self.raise_at:
            raise ValueError(f"no task for {values[0]}")
        return [self.targets[values[0] % 3]]

    def choose_tasks_many(self, values_list: Any) -> list[list[int]]:
        self.batch_calls += 1
        return [self.choose_tasks(v) for v in values_list]


def emitter_with(grouping: Mod) -> Emitter:
    return Emitter(custom_plan(), 1, 10_000, lambda frames: None, custom_loader=lambda data: grouping,
                   prepare_custom=lambda g, *a: g.prepare(None, *a), rng=random.Random(0))


@pytest.mark.parametrize("many", [True, False])
def test_a_batch_goes_where_one_emit_each_sends_it(many: bool) -> None:
    values = [[n] for n in range(50)]
    batch, each = Mod(many=many), Mod(many=many)
    a, b = emitter_with(batch), emitter_with(each)
    a.emit_many(values, "default")
    for v in values:
        b.emit(v, "default", None, False)
    assert a.pending_rows() == b.pending_rows()
    assert {t: [r[1][0] for r in rows] for t, rows in a.pending_rows().items()} == {
        2: list(range(0, 50, 3)), 3: list(range(1, 50, 3)), 4: list(range(2, 50, 3))}
    assert batch.batch_calls == (1 if many else 0) and a.emitted == 50


def test_a_grouping_that_raises_emits_the_tuples_before_the_bad_one() -> None:
    g = Mod(raise_at=7)
    em = emitter_with(g)
    with pytest.raises(ValueError) as e:
        em.emit_many([[n] for n in range(10)], "default")
    assert str(e.value) == "no task for 7"
    assert g.batch_calls == 1  # asked for the batch first, then tuple by tuple
    assert sorted(r[1][0] for rows in em.pending_rows().values() for r in rows) == list(range(7))


def test_a_batch_choice_is_checked_against_the_subscribed_tasks() -> None:
    class Wrong:
        def choose_tasks(self, values: Any) -> list[int]:
            return [4]

        def choose_tasks_many(self, values_list: Any) -> list[list[int]]:
            return [[4]] * (len(values_list) - 1) + [[5]]

    class Short(Wrong):
        def choose_tasks_many(self, values_list: Any) -> list[list[int]]:
            return [[4]]

    r = make_router(GroupingDef(GroupingKind.CUSTOM), target_tasks=TARGETS, local_tasks=frozenset(),
                    field_indices=(), custom=Wrong())
    with pytest.raises(RoutingError) as e:
        choose_many(r, [[1], [2]])
    assert str(e.value) == "custom grouping Wrong chose task 5, which is not one of the subscribed tasks [4, 7, 9]"
    short = make_router(GroupingDef(GroupingKind.CUSTOM), target_tasks=TARGETS, local_tasks=frozenset(),
                        field_indices=(), custom=Short())
    with pytest.raises(RoutingError) as e:
        choose_many(short, [[1], [2]])
    assert str(e.value) == "custom grouping Short chose for 1 tuples of a batch of 2"
    # a router without a batch choice: choose per values
    fields = make_router(GroupingDef(GroupingKind.FIELDS, ("w",)), target_tasks=TARGETS, local_tasks=frozenset(),
                         field_indices=(0,))
    assert choose_many(fields, [["a"], ["b"]]) == [fields.choose(["a"]), fields.choose(["b"])]


def by_len_or_list(element: Any, n: int) -> Any:
    return [0, 2] if element == "both" else len(element)


def test_streamlet_groupings_choose_a_batch_as_they_choose_each() -> None:
    rep = RepartitionGrouping("repartition-1", functions.pack("t", by_len_or_list))
    rep.prepare(None, "c", "s", TARGETS)
    rows = [["a"], ["bb"], ["both"], ["cccc"], [""]]
    assert [list(t) for t in rep.choose_tasks_many(rows)] == [rep.choose_tasks(r) for r in rows] == [
        [7], [9], [4, 9], [7], [4]]

    def key_or_raise(element: Any) -> Any:
        if element == "boom":
            raise KeyError(element)
        return element

    key = KeyFunctionGrouping("count-1", functions.pack("t", key_or_raise))
    key.prepare(None, "c", "s", TARGETS)
    rows = [["a"], ["boom"], ["b"], ["a"]]
    assert [list(t) for t in key.choose_tasks_many(rows)] == [key.choose_tasks(r) for r in rows]
    assert list(key.choose_tasks_many([["boom"]])[0]) == [4]  # the first task, as choose_tasks


def test_a_bad_repartition_answer_is_the_per_tuple_error() -> None:
    rep = RepartitionGrouping("repartition-1", functions.pack("t", lambda element, n: "x"))
    rep.prepare(None, "c", "s", TARGETS)
    with pytest.raises(Exception) as e:
        rep.choose_tasks_many([["a"]])
    assert str(e.value) == ("repartition-1: the repartition function must return a partition index (int) or a "
                            "list of them, found 'x' for element 'a'")


def test_repartition_int_answers_out_of_range_are_taken_modulo_as_per_tuple() -> None:
    rep = RepartitionGrouping("repartition-1", functions.pack("t", lambda element, n: element - 5))
    rep.prepare(None, "c", "s", TARGETS)
    rows = [[i] for i in range(12)]  # answers -5..6: negative and past the partition count
    assert [list(t) for t in rep.choose_tasks_many(rows)] == [rep.choose_tasks(r) for r in rows]
    assert rep.choose_tasks_many([]) == []


class Repartition(Mod):
    """The Streamlet repartition's grouping (by length, or every task for "both") in the place
    of ``Mod``: it has the bare-values choice, ``choose_tasks_one_many``."""

    def __init__(self, fn: Any = by_len_or_list) -> None:
        super().__init__()
        self.rep = RepartitionGrouping("repartition-1", functions.pack("t", fn))
        self.one_calls = 0

    def prepare(self, context: Any, component: str, stream: str, targets: list[int]) -> None:
        self.rep.prepare(context, component, stream, targets)

    def choose_tasks(self, values: Any) -> list[int]:
        return self.rep.choose_tasks(values)

    def choose_tasks_many(self, values_list: Any) -> list[Any]:
        self.batch_calls += 1
        return self.rep.choose_tasks_many(values_list)

    def choose_tasks_one_many(self, elements: Any) -> list[Any]:
        self.one_calls += 1
        return self.rep.choose_tasks_one_many(elements)


def test_bare_values_go_where_one_emit_each_sends_their_tuples() -> None:
    elements = ["a", "bb", "both", "cccc", "", "dd"] * 5
    bare, each = Repartition(), Repartition()
    a, b = emitter_with(bare), emitter_with(each)  # type: ignore[arg-type]
    a.emit_one_many(elements, "default")
    for x in elements:
        b.emit([x], "default", None, False)
    assert {t: [(s, tuple(v)) for s, v in rows] for t, rows in a.pending_rows().items()} == {
        t: [(s, tuple(v)) for s, v in rows] for t, rows in b.pending_rows().items()}
    assert bare.one_calls == 1 and bare.batch_calls == 0  # the bare choice, once for the batch
    assert a.emitted == len(elements)  # "both" went to two tasks and counts once, as emit counts it


def test_bare_values_through_a_grouping_without_the_bare_choice_take_its_batch_choice() -> None:
    g = Mod()
    em = emitter_with(g)
    em.emit_one_many(list(range(9)), "default")
    assert g.batch_calls == 1
    assert {t: [r[1][0] for r in rows] for t, rows in em.pending_rows().items()} == {
        2: [0, 3, 6], 3: [1, 4, 7], 4: [2, 5, 8]}


def test_a_grouping_that_raises_on_a_bare_value_emits_the_values_before_the_bad_one() -> None:
    g = Mod(raise_at=7)
    em = emitter_with(g)
    with pytest.raises(ValueError) as e:
        em.emit_one_many(list(range(10)), "default")
    assert str(e.value) == "no task for 7"
    assert sorted(r[1][0] for rows in em.pending_rows().values() for r in rows) == list(range(7))


def test_the_bare_choice_is_checked_against_the_subscribed_tasks() -> None:
    class Wrong:
        def choose_tasks(self, values: Any) -> list[int]:
            return [4]

        def choose_tasks_one_many(self, elements: Any) -> list[Any]:
            return [4, (7, 5)][:len(elements)]

    r = make_router(GroupingDef(GroupingKind.CUSTOM), target_tasks=TARGETS, local_tasks=frozenset(),
                    field_indices=(), custom=Wrong())
    assert r.choose_one_many(["x"]) == [4]  # type: ignore[union-attr]
    with pytest.raises(RoutingError) as e:
        r.choose_one_many(["x", "y"])  # type: ignore[union-attr]
    assert str(e.value) == "custom grouping Wrong chose task 5, which is not one of the subscribed tasks [4, 7, 9]"
    with pytest.raises(RoutingError) as e:
        r.choose_one_many(["x", "y", "z"])  # type: ignore[union-attr]
    assert str(e.value) == "custom grouping Wrong chose for 2 tuples of a batch of 3"


def test_the_repartitions_bare_choice_is_its_choice_per_tuple() -> None:
    rep = RepartitionGrouping("repartition-1", functions.pack("t", by_len_or_list))
    rep.prepare(None, "c", "s", TARGETS)
    elements = ["a", "bb", "both", "cccc", ""]
    assert rep.choose_tasks_one_many(elements) == [7, 9, (4, 9), 7, 4]
    assert [[t] if type(t) is int else list(t) for t in rep.choose_tasks_one_many(elements)] == [
        rep.choose_tasks([x]) for x in elements]


def test_bare_values_past_several_batch_ends_go_in_order_with_each_frame_cut_at_the_batch_size() -> None:
    """A batch that starts in a partly filled one and crosses two batch ends, with answers of one
    task and of several: each frame holds its batch's tuples for its task, in emit order (a
    value sent to two tasks is one tuple of the batch, as ``emit`` counts it)."""
    from heron_py.common.framing import BATCH_HEADER, BODY_OFFSET, HEADER_SIZE
    from heron_py.common.serialization import body_rows, loads_body

    frames: list[bytes] = []
    em = Emitter(custom_plan(), 1, 4, frames.extend, custom_loader=lambda data: Repartition(),
                 prepare_custom=lambda g, *a: g.prepare(None, *a), rng=random.Random(0))
    em.emit(["x"], "default", None, False)  # one tuple already in the batch
    elements = ["a", "both", "bb", "cccc", "both", "", "dd", "e", "both"]
    em.emit_one_many(elements, "default")
    em.flush()
    got = []
    for f in frames:
        dest, _src, n = BATCH_HEADER.unpack_from(f, HEADER_SIZE)
        values = tuple(v[0] for _s, v in body_rows(*loads_body(f[BODY_OFFSET:])))
        assert n == len(values)
        got.append((dest, values))
    rep = RepartitionGrouping("repartition-1", functions.pack("t", by_len_or_list))
    rep.prepare(None, "c", "s", [2, 3, 4])
    want = []
    for batch in (["x", "a", "both", "bb"], ["cccc", "both", "", "dd"], ["e", "both"]):
        per_task: dict[int, list[str]] = {}
        for x in batch:
            for t in rep.choose_tasks([x]):
                per_task.setdefault(t, []).append(x)
        want += [(t, tuple(xs)) for t, xs in per_task.items()]
    assert sorted(got) == sorted(want)
    assert len(got) == 9 and em.emitted == 10


def test_a_choice_list_longer_than_its_values_is_refused() -> None:
    em = emitter_with(Mod())
    with pytest.raises(ValueError):
        em._append_runs([[1], [2]], [2, 3, 4], "default", None, 1)
