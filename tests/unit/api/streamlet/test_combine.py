"""count_by_key's combiner (heron_py/api/streamlet/combine.py, graph.combiners): which programs
get it, what the source's task then sends, that the counts come out as without it, and the one
line an element whose key function raises gets in the source's task."""

from __future__ import annotations

import collections
import logging
import pickle

import pytest

from heron_py.api.streamlet import combine, keyed
from heron_py.api.streamlet.builder import Builder
from heron_py.api.streamlet.config import Config
from heron_py.api.streamlet.groupings import (
    CombinedKeyGrouping,
    KeyFunctionGrouping,
    KeyGrouping,
    PartitionIndexGrouping,
    RepartitionGrouping,
)
from heron_py.api.streamlet.runner import build_topology
from heron_py.planner.model import GroupingKind
from heron_py.testing import run_in_process
from tests.fakes import Items
from tests.support import mark_saved

TEXT = ["the cat sat", "the dog sat on the cat", "a cat", "", "on and on"]
WORDS = [w for line in TEXT for w in line.split()]


def config(fusion):
    c = Config()
    c.set_fusion(fusion)
    return c


def key_or_raise(word):
    if word == "dog":
        raise ValueError("no key for dog")
    return word


# --- count_keys, pure -----------------------------------------------------------------------------

def test_count_keys_counts_in_first_appearance_order_calling_the_key_function_once_per_element():
    calls = []

    def key(w):
        calls.append(w)
        return w.upper()

    errors = []
    assert combine.count_keys(key, WORDS, lambda x, e: errors.append(x)) == [
        ("THE", 3), ("CAT", 3), ("SAT", 2), ("DOG", 1), ("ON", 3), ("A", 1), ("AND", 1)]
    assert calls == WORDS and errors == []


def test_count_keys_skips_an_element_whose_key_function_raises_and_reports_it_once():
    errors = []
    got = combine.count_keys(key_or_raise, WORDS, lambda x, e: errors.append((x, str(e))))
    assert dict(got) == dict(collections.Counter(w for w in WORDS if w != "dog"))
    assert errors == [("dog", "no key for dog")]


def test_count_keys_reports_an_unhashable_key_with_its_element_and_counts_the_rest():
    errors = []
    elements = ["a", "b", "list", "a", "dog", "list"]

    def key(x):
        if x == "dog":
            raise ValueError("no key for dog")
        return [x] if x == "list" else x

    got = combine.count_keys(key, elements, lambda x, e: errors.append((x, type(e).__name__, str(e))))
    assert got == [("a", 2), ("b", 1)]
    assert errors == [("dog", "ValueError", "no key for dog"), ("list", "TypeError", "unhashable type: 'list'"),
                      ("list", "TypeError", "unhashable type: 'list'")]


def test_count_keys_routed_counts_per_partition_and_key_an_element_in_two_partitions_in_each():
    routes = [[0], [1], [0], [0, 1], [1]]
    elements = ["a", "a", "a", "b", "dog"]
    errors = []
    got = combine.count_keys_routed(key_or_raise, elements, routes, False, lambda x, e: errors.append((x, str(e))))
    assert got == [("a", 2, 0), ("a", 1, 1), ("b", 1, 0), ("b", 1, 1)]
    assert errors == [("dog", "no key for dog")]
    # one partition each: the C-level count, same answer
    assert combine.count_keys_routed(str.upper, ["x", "y", "x"], [1, 0, 1], True, None) == [("X", 2, 1), ("Y", 1, 0)]


@pytest.mark.parametrize("single", [True, False])
def test_count_keys_routed_reports_an_unhashable_key_with_its_element(single):
    errors = []
    routes = [0, 1, 0] if single else [[0], [1], [0]]
    got = combine.count_keys_routed(lambda x: [x] if x == "l" else x, ["a", "l", "a"], routes, single,
                                    lambda x, e: errors.append((x, str(e))))
    assert got == [("a", 2, 0)]
    assert errors == [("l", "unhashable type: 'list'")]


def grouping(fn, n):
    g = RepartitionGrouping("streamlet 'repartition-1' (repartition)", pickle.dumps(None))
    g.prepare(None, "c", "output", list(range(n)))
    g._fn = fn
    return lambda elements: combine.route(g.function(), n, g.indexes, elements)


def test_route_calls_the_function_once_per_element_and_takes_ints_modulo_the_partitions():
    calls = []

    def fn(w, n):
        calls.append((w, n))
        return len(w)

    assert grouping(fn, 3)(["the", "a", "cats"]) == ([0, 1, 1], True, None)
    assert calls == [("the", 3), ("a", 3), ("cats", 3)]
    assert grouping(lambda w, n: [0, 2] if w == "a" else -1, 3)(["the", "a"]) == ([[2], [0, 2]], False, None)
    assert grouping(fn, 3)([]) == ([], True, None)


@pytest.mark.parametrize("fn, found", [(lambda w, n: "bad" if w == "dog" else len(w) % n, "'bad'"),
                                       (lambda w, n: [True] if w == "dog" else [len(w) % n], "[True]")],
                         ids=["a str", "a bool"])
def test_route_stops_at_the_element_a_repartition_function_answers_badly_keeping_the_ones_before(fn, found):
    routes, single, error = grouping(fn, 3)(["the", "a", "dog", "cat"])
    assert routes == [[0], [1]] and not single
    assert str(error) == ("streamlet 'repartition-1' (repartition): the repartition function must return a "
                          f"partition index (int) or a list of them, found {found} for element 'dog'")


def test_route_stops_at_the_element_a_repartition_function_raises_on_keeping_the_ones_before():
    def fn(w, n):
        if w == "dog":
            raise KeyError("dog")
        return 1

    routes, _single, error = grouping(fn, 3)(["the", "a", "dog", "cat"])
    assert routes == [[1], [1]] and repr(error) == "KeyError('dog')"


# --- combined_counts: once per distinct element where equal elements are one value ---------------

def per_element(key_fn, elements, partitioner=None):
    """The per-element path's answer (count_keys; route then count_keys_routed)."""
    errors = []
    if partitioner is None:
        return combine.count_keys(key_fn, elements, lambda x, e: errors.append(x)), None, errors
    fn, n, indexes = partitioner
    routes, single, error = combine.route(fn, n, indexes, elements)
    return combine.count_keys_routed(key_fn, elements[:len(routes)], routes, single,
                                     lambda x, e: errors.append(x)), error, errors


def checked(n):
    g = RepartitionGrouping("streamlet 'repartition-1' (repartition)", pickle.dumps(None))
    g.prepare(None, "c", "output", list(range(n)))
    return g.indexes


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("shape", ["keys", "one partition", "a list of partitions"])
def test_combined_counts_equal_the_per_element_ones_in_the_same_order(seed, shape):
    import random
    rng = random.Random(seed)
    vocabulary = [f"w{i}" for i in range(rng.randint(1, 60))]
    elements = [rng.choice(vocabulary) for _ in range(rng.randint(1, 400))]
    partitioner = {"keys": None,
                   "one partition": (lambda w, n: len(w) * 7 - 20, 3, checked(3)),
                   "a list of partitions": (lambda w, n: [0, 2] if w.endswith("1") else [len(w) % n], 3,
                                            checked(3))}[shape]
    key = str.upper
    assert combine.distinct_counts(key, elements, partitioner) is not None  # the distinct path ran
    got = combine.combined_counts(key, elements, lambda x, e: pytest.fail(f"{x}: {e}"), partitioner)
    want, error, errors = per_element(key, elements, partitioner)
    assert got == (want, None) and error is None and errors == []


def test_combined_counts_call_the_functions_once_per_distinct_element_in_first_appearance_order():
    keyed, parted = [], []

    def key(w):
        keyed.append(w)
        return w[0]

    def part(w, n):
        parted.append(w)
        return len(w)

    # "a" and "and" share a key and a partition: their counts add up
    assert combine.combined_counts(key, WORDS, None, (part, 2, checked(2))) == (
        [("t", 3, 1), ("c", 3, 1), ("s", 2, 1), ("d", 1, 1), ("o", 3, 0), ("a", 2, 1)], None)
    distinct = ["the", "cat", "sat", "dog", "on", "a", "and"]
    assert keyed == distinct and parted == distinct


@pytest.mark.parametrize("elements", [[1, True, 1, 2], [1.0, 1, 2], [("a",), ("a",)], ["a", b"a"], []],
                         ids=["int and bool", "float and int", "tuples", "str and bytes", "empty"])
def test_combined_counts_go_per_element_where_equal_elements_may_differ(elements):
    calls = []

    def key(x):
        calls.append(x)
        return type(x).__name__

    assert combine.distinct_counts(key, elements, None) is None
    got = combine.combined_counts(key, elements, None)
    assert got == (list(collections.Counter(type(x).__name__ for x in elements).items()), None)
    assert calls == elements  # 1 and True are equal, yet their keys differ: each is asked


def test_combined_counts_after_a_key_function_error_report_each_bad_element_as_per_element():
    errors = []
    elements = ["a", "dog", "b", "dog"]
    got = combine.combined_counts(key_or_raise, elements, lambda x, e: errors.append((x, str(e))))
    assert got == ([("a", 1), ("b", 1)], None)
    assert errors == [("dog", "no key for dog"), ("dog", "no key for dog")]  # one line per element, as before


def test_combined_counts_stop_at_the_element_a_repartition_function_answers_badly_as_per_element():
    elements = ["the", "a", "the", "dog", "cat"]
    def fn(w, n):
        return "bad" if w == "dog" else len(w) % n

    got, error = combine.combined_counts(str.upper, elements, None, (fn, 3, checked(3)))
    assert got == [("THE", 2, 0), ("A", 1, 1)]
    assert str(error) == ("streamlet 'repartition-1' (repartition): the repartition function must return a "
                          "partition index (int) or a list of them, found 'bad' for element 'dog'")


# --- which programs combine -----------------------------------------------------------------------

def by_length(w, n):
    return len(w) % n


def program(emit, *, fusion=True, clone=False, repartition=False, window=False, behind=False, partitioner=None):
    b = Builder()
    words = b.new_source(Items(TEXT)).flat_map(str.split)
    if repartition:
        words = words.repartition(2, partitioner)
        if behind:  # an operator fused behind the repartition: its task is no plain forward
            words = words.map(str.upper)
    if window:
        from heron_py.api.streamlet.windowconfig import WindowConfig
        words = words.map(lambda w: (w, 1)) \
            .reduce_by_key_and_window(WindowConfig.create_tumbling_window(1), lambda a, c: a + c)
    if clone:  # a second reader of the source's task (it would see pairs instead of words)
        words.log()
    words.count_by_key(lambda w: w, emit=emit).set_num_partitions(2).log()
    return build_topology("t", config(fusion), b)


@pytest.mark.parametrize("emit", ["tick", "final"])
def test_a_source_task_combines_for_a_count_by_key_that_emits_per_key(emit):
    topo = program(emit)
    source = topo.component("generator-1__flatmap-1")
    count = topo.component("countbykey-1")
    assert source.config[combine.COMBINE_WHERE] == "streamlet 'countbykey-1' (count_by_key)"
    assert combine.COMBINE_KEY_FUNCTION in source.config
    assert count.config[combine.COMBINED] == "true"
    [inp] = count.inputs
    assert inp.grouping.kind is GroupingKind.CUSTOM and type(pickle.loads(inp.grouping.custom.data)) is KeyGrouping


@pytest.mark.parametrize("partitioner", [None, by_length], ids=["shuffled", "by a function"])
def test_a_source_task_combines_through_a_repartition_between_which_keeps_its_task(partitioner):
    topo = program("tick", repartition=True, partitioner=partitioner)
    source = topo.component("generator-1__flatmap-1")
    rep = topo.component("repartition-1")
    count = topo.component("countbykey-1")
    assert source.config[combine.COMBINE_WHERE] == "streamlet 'countbykey-1' (count_by_key)"
    assert count.config[combine.COMBINED] == "true"
    [rin] = rep.inputs
    [cin] = count.inputs
    assert cin.component == "repartition-1"
    if partitioner is None:  # shuffled pairs: the repartition's own grouping
        assert combine.COMBINE_PARTITIONER not in source.config
        assert rin.grouping.kind is GroupingKind.SHUFFLE
        assert type(pickle.loads(cin.grouping.custom.data)) is KeyGrouping
    else:  # the function called in the source's task: triples carry the partition
        assert source.config[combine.COMBINE_PARTITIONS] == "2"
        assert source.config[combine.COMBINE_PARTITIONER_WHERE] == "streamlet 'repartition-1' (repartition)"
        assert type(pickle.loads(rin.grouping.custom.data)) is PartitionIndexGrouping
        assert type(pickle.loads(cin.grouping.custom.data)) is CombinedKeyGrouping


@pytest.mark.parametrize("case", [dict(emit="update"), dict(emit="tick", fusion=False),
                                  dict(emit="tick", clone=True), dict(emit="final", window=True),
                                  dict(emit="update", repartition=True, partitioner=by_length),
                                  dict(emit="tick", repartition=True, partitioner=by_length, behind=True)],
                         ids=["update mode", "fusion off", "a second reader of the source's task",
                              "a windowed operator before it", "update mode behind a repartition",
                              "an operator fused behind the repartition"])
def test_no_combiner_where_it_would_change_what_is_seen_or_is_not_asked_for(case):
    topo = program(**case)
    count = topo.component("countbykey-1")
    assert combine.COMBINED not in count.config
    assert all(combine.COMBINE_KEY_FUNCTION not in c.config for c in topo.components)
    [inp] = count.inputs
    assert type(pickle.loads(inp.grouping.custom.data)) is KeyFunctionGrouping


# --- runs in process ------------------------------------------------------------------------------

def counts_of(emit, fusion, key=lambda w: w, text=TEXT, repartition=False):
    b = Builder()
    words = b.new_source(Items(text * 20)).set_num_partitions(2).flat_map(str.split)
    if repartition:  # a function, or shuffled (None)
        words = words.repartition(2, repartition if callable(repartition) else None)
    words.count_by_key(key, emit=emit).set_num_partitions(3).set_name("count").log()
    r = run_in_process(build_topology("t", config(fusion), b), capture=["log-1"])
    latest: dict[str, int] = {}
    for rec in r.received["log-1"]:
        k, n = rec.values[0]
        latest[k] = max(n, latest.get(k, 0))  # log() is shuffled over 3 tasks: updates may pass each other
    return latest, r


def both_partitions_for_the(w, n):
    return [0, 1] if w == "the" else len(w) % n


@pytest.mark.parametrize("repartition", [False, by_length, True, both_partitions_for_the],
                         ids=["combined", "through a repartition by a function", "through a shuffled repartition",
                              "through a repartition sending 'the' to both partitions"])
@pytest.mark.parametrize("emit", ["tick", "final"])
def test_combined_counts_equal_the_uncombined_ones_and_each_key_is_counted_in_one_task(emit, repartition):
    combined, r = counts_of(emit, True, repartition=repartition)
    plain, _ = counts_of(emit, False, repartition=repartition)
    # each of the 2 source tasks emits every item (Items is per task); a 'the' in two partitions twice
    twice = 2 if repartition is both_partitions_for_the else 1
    expected = {w: 40 * c * (twice if w == "the" else 1) for w, c in collections.Counter(WORDS).items()}
    assert combined == plain == expected
    counters = [c for c in r.components.values() if isinstance(c, keyed.CountByKeyBolt)]
    assert len(counters) == 3 and all(c._combined for c in counters)
    held = [set(c.values) for c in counters]
    assert sum(map(len, held)) == len(set(WORDS))  # no key in two tasks


def test_a_key_function_that_raises_drops_its_element_with_one_line_from_the_source_task(caplog):
    with caplog.at_level(logging.ERROR):
        got, _ = counts_of("final", True, key=key_or_raise, text=["the dog sat"])
    assert got == {"the": 40, "sat": 40}
    lines = [rec.getMessage() for rec in caplog.records if "key_function raised" in rec.getMessage()]
    assert lines == ["streamlet 'count' (count_by_key): key_function raised ValueError: no key for dog for element "
                     "'dog'; dropped (its tuple is not tracked)"] * 40


def bad_partition_for_dog(w, n):
    return "bad" if w == "dog" else len(w) % n


@pytest.mark.parametrize("fusion", [True, False], ids=["combined", "uncombined"])
def test_a_repartition_function_that_fails_ends_the_source_task_with_its_error_as_without_the_combiner(fusion):
    b = Builder()
    b.new_source(Items(["the cat", "a dog sat", "on"])).flat_map(str.split).repartition(2, bad_partition_for_dog) \
        .count_by_key(lambda w: w, emit="final").set_name("count").log()
    with pytest.raises(Exception) as e:
        run_in_process(build_topology("t", config(fusion), b), capture=["log-1"])
    assert ("streamlet 'repartition-1' (repartition): the repartition function must return a partition index "
            "(int) or a list of them, found 'bad' for element 'dog'") in str(e.value)


def test_a_counting_task_refuses_a_combined_input_in_update_mode():
    bolt = keyed.CountByKeyBolt(None)

    class Ctx:
        registered_metrics: dict = {}

        def get_component_id(self):
            return "count"

        def register_metric(self, *a):
            pass

    bolt._load = lambda config, context, key: (lambda w: w)
    with pytest.raises(ValueError) as e:
        bolt.initialize({keyed.EMIT: "update", combine.COMBINED: True}, Ctx())
    assert str(e.value) == ("streamlet 'count' (count_by_key): a combined input needs emit 'tick' or 'final' "
                            "(update mode emits per element), found emit 'update'")


# --- effectively once: a counting task fed (key, count) pairs checkpoints and rolls back exactly ---

@pytest.mark.parametrize("routed", [False, True], ids=["pairs", "triples through a repartition"])
@pytest.mark.parametrize("emit", ["tick", "final"])
def test_a_combined_count_restored_from_a_checkpoint_continues_exactly(tmp_path, emit, routed):
    from heron_py.common.framing import encode_marker
    from tests.unit.api.streamlet.test_keyed import _batch, _emitted, stateful_count

    def c(key, n):  # what reaches the count: (key, count), or (key, count, partition) through a repartition
        return (key, n, len(key) % 2) if routed else (key, n)

    host, task, storage, me, src, sent = stateful_count(tmp_path, emit, extra={combine.COMBINED: "true"})
    task.on_batch(_batch(me, src, [c("a", 2), c("b", 1)]))
    task.on_batch(_batch(me, src, [c("c", 4), c("a", 1)]))
    task.on_marker(encode_marker(me, src, 5))
    mark_saved(storage, "k", 5)
    saved = pickle.loads(storage.load("k", 5, me))
    assert saved[keyed.VALUES] == {"a": 3, "b": 1, "c": 4}
    task.on_batch(_batch(me, src, [c("a", 10), c("z", 1)]))  # after the checkpoint: rolled back below
    assert host.user.values == {"a": 13, "b": 1, "c": 4, "z": 1}
    task.restore(2, 5)
    task.start_processing(2)
    assert host.user.values == {"a": 3, "b": 1, "c": 4}
    host.flush()
    sent.clear()
    task.on_batch(_batch(me, src, [c("a", 2)]))
    if emit == "tick":
        host.tick()
        host.flush()
        assert sorted(_emitted(sent)) == [("a", 5), ("b", 1), ("c", 4)]  # every key changed since the start
    else:
        host.close()
        assert sorted(_emitted(sent)) == [("a", 5), ("b", 1), ("c", 4)]


def test_a_combining_source_takes_larger_batches_the_others_the_usual():
    from heron_py.api.streamlet.components import COMBINED_BATCH_FACTOR, SourceSpout

    def limits(emit, tick_secs=None):
        b = Builder()
        settings = {"tick_secs": tick_secs} if tick_secs else {}
        b.new_source(Items(TEXT)).flat_map(str.split).count_by_key(lambda w: w, emit=emit, **settings).log()
        r = run_in_process(build_topology("t", config(True), b), capture=["log-1"])
        return {(c._sizer.limits.max_elements, c._sizer.limits.target_s)
                for c in r.components.values() if isinstance(c, SourceSpout)}

    usual = SourceSpout.limits
    bigger = usual.max_elements * COMBINED_BATCH_FACTOR
    assert limits("final") == {(bigger, usual.target_s * COMBINED_BATCH_FACTOR)}
    assert limits("tick") == {(bigger, usual.target_s * COMBINED_BATCH_FACTOR)}  # a 1 s tick: 250 ms allowed
    assert limits("tick", 0.02) == {(bigger, 0.005)}  # a quarter of the tick
    assert limits("tick", 0.001) == {(bigger, usual.target_s)}  # never below the usual target
    assert limits("update") == {(usual.max_elements, usual.target_s)}
