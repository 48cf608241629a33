"""count_by_key's combiner: a source's task counts each batch's keys before the exchange.

A count_by_key in "tick" or "final" mode whose only input is a source's task (graph.combiners,
with fusion) has that task send one (key, count) pair per key and batch instead of every
element, as Spark's reduceByKey combines on the map side: the routing, the emit and the
pickling are then per key, not per element. Those two modes emit per key, never per element,
so downstream sees the same; "update" mode keeps a tuple per element. The counting task is told
its input is combined (``COMBINED``) and adds each pair's count (keyed.py).

A repartition between them (the source's task its only input, the count_by_key its only
reader, nothing fused behind it) is kept and still decides where each element goes: the
source's task calls its partition function on every element, as the engine's grouping would,
and counts per (partition, key), sending (key, count, partition) triples that
``groupings.PartitionIndexGrouping`` delivers to that partition; the repartition's task
forwards them and ``groupings.CombinedKeyGrouping`` routes them on by key. An element sent to
two partitions is counted in both, as its two copies would be. Pure, apart from the one log
line a bad element gets.

The source's task calls the key function (and the partition function) once per *distinct*
element of a batch (``combined_counts``): a batch of 20,000 words holds about 1,000 distinct
ones, so most of the per-element Python calls and the per-element count go (312 to 68 ns a word
through a repartition, 72 to 60 without, measured on the benchmark's batch; a batch of
20,000 distinct strings costs 230 instead of 179 ns an element without a repartition, the
same through one). That takes the functions to be deterministic, a function of
the element alone, as Flink's key selectors must be; the counts that reach the count_by_key are
the same either way, since it counts by key whatever partition an element took. It is done only
where equal elements cannot be told apart (every element a ``str``, every one a ``bytes`` or
every one an ``int``: ``1`` and ``True`` are equal, but ``type`` tells them apart); any error
(a function raising, a bad partition answer, an unhashable key) sends the batch down the
per-element path, which names the element as before.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from itertools import repeat
from typing import Any

from heron_py.api.streamlet.chain import apply_map

# on the counting stage: its input is (key, count) pairs from a combiner
COMBINED = "streamlet.keyed.combined"
# on the source's task: the count_by_key's packed key function, and how its errors name it
COMBINE_KEY_FUNCTION = "streamlet.keyed.combine.key_function"
COMBINE_WHERE = "streamlet.keyed.combine.where"
# on the source's task of a tick-mode count: how long one combined batch may take at most (a
# quarter of the tick, so the combining delays an update by a fraction of the tick at most)
COMBINE_MAX_BATCH_S = "streamlet.keyed.combine.max.batch.secs"
# on the source's task, when a repartition with a partition function is between: that
# function (packed), the repartition's task count, and how the repartition's errors name it
COMBINE_PARTITIONER = "streamlet.keyed.combine.partitioner"
COMBINE_PARTITIONS = "streamlet.keyed.combine.partitions"
COMBINE_PARTITIONER_WHERE = "streamlet.keyed.combine.partitioner.where"
# a keyed operator's task metric: the elements its functions raised on (the source's task
# counts there what its combiner dropped)
METRIC_BAD = "streamlet-keyed-failed-inputs"


def short(value: Any, limit: int = 200) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def log_bad_element(logger: Any, where: str, what: str, element: Any, error: Exception, outcome: str) -> None:
    """The one line a keyed operator logs for an element its function raised on."""
    logger.error("%s: %s raised %s: %s for element %s; %s", where, what, type(error).__name__, error, short(element),
                 outcome)


def _without(xs: Sequence[Any], skipped: list[int]) -> Sequence[Any]:
    """``xs`` without the items at the indexes ``skipped`` (those whose key function raised)."""
    if not skipped:
        return xs
    dropped = set(skipped)
    return [x for i, x in enumerate(xs) if i not in dropped]


def count_keys(key_fn: Callable[[Any], Any], elements: Sequence[Any],
               on_error: Callable[[Any, Exception], None]) -> list[tuple[Any, int]]:
    """count_by_key's combiner: how many of ``elements`` have each ``key_fn(element)``, as
    (key, count) pairs in the order the keys first appear. ``key_fn`` is called once per
    element, in one C-level loop (chain.apply_map); an element it raises on, or whose key is not
    hashable, goes to ``on_error(element, error)`` and is not counted. Pure."""
    keys: list[Any] = []
    skipped = apply_map(key_fn, elements, keys, on_error)
    try:
        return list(Counter(keys).items())
    except TypeError:  # an unhashable key (a list, a dict): counted one by one to name its element
        pass
    counts: dict[Any, int] = {}
    for element, key in zip(_without(elements, skipped), keys, strict=True):
        try:
            counts[key] = counts.get(key, 0) + 1
        except TypeError as e:
            on_error(element, e)
    return list(counts.items())


# the element types whose equal values are indistinguishable (see the module's doc)
_DISTINCT_TYPES = frozenset({str, bytes, int})


def combined_counts(key_fn: Callable[[Any], Any], elements: Sequence[Any],
                    on_error: Callable[[Any, Exception], None],
                    partitioner: tuple[Callable[[Any, int], Any], int, Callable[[Any, Any], list[int]]] | None = None,
                    ) -> tuple[list[Any], Exception | None]:
    """What a combining source's task sends for a batch: (key, count) pairs, or with a
    ``partitioner`` (the repartition's function, its partition count and its grouping's
    ``indexes`` check) (key, count, partition) triples, and the repartition function's error
    that ends the task (after the triples of the elements before it) or None. The functions are
    called once per distinct element when ``distinct_counts`` can do it, else per element
    (``count_keys``, ``route`` then ``count_keys_routed``)."""
    fast = distinct_counts(key_fn, elements, partitioner)
    if fast is not None:
        return fast, None
    if partitioner is None:
        return count_keys(key_fn, elements, on_error), None
    fn, n, indexes = partitioner
    routes, single, error = route(fn, n, indexes, elements)
    return count_keys_routed(key_fn, elements[:len(routes)], routes, single, on_error), error


def distinct_counts(key_fn: Callable[[Any], Any], elements: Sequence[Any],
                    partitioner: tuple[Callable[[Any, int], Any], int, Callable[[Any, Any], list[int]]] | None,
                    ) -> list[Any] | None:
    """``combined_counts``'s answer with each function called once per distinct element (in
    the order the elements first appear, so pairs and triples come in the per-element order),
    or None when that cannot be done here: elements not all of one type of ``_DISTINCT_TYPES``,
    or any error (the per-element path then names the element). Pure."""
    if not elements or len(set(map(type, elements))) != 1 or type(elements[0]) not in _DISTINCT_TYPES:
        return None
    seen = Counter(elements)
    distinct = list(seen)
    try:
        keys = list(map(key_fn, distinct))
        # distinct keys (a key function that tells the elements apart, as the word count's
        # does): the pairs are made in C, with no Python step per element
        unique = len(set(keys)) == len(keys)
        if partitioner is None:
            if unique:
                return list(zip(keys, seen.values(), strict=True))
            counts: Counter[Any] = Counter()
            for key, c in zip(keys, seen.values(), strict=True):
                counts[key] += c
            return list(counts.items())
        fn, n, indexes = partitioner
        answers = list(map(fn, distinct, repeat(n)))
        routed: Counter[tuple[int, Any]] = Counter()
        if set(map(type, answers)) == {int}:
            if unique:
                if min(answers) < 0 or max(answers) >= n:
                    answers = [a % n for a in answers]
                return list(zip(keys, seen.values(), answers, strict=True))
            for p, key, c in zip(answers, keys, seen.values(), strict=True):
                routed[p % n, key] += c
        else:
            for answer, x, key, c in zip(answers, distinct, keys, seen.values(), strict=True):
                for p in indexes(answer, x):
                    routed[p, key] += c
    except Exception:  # a function's error or an unhashable key: the per-element path names the element
        return None
    return [(k, c, p) for (p, k), c in routed.items()]


def route(fn: Callable[[Any, int], Any], n: int, indexes: Callable[[Any, Any], list[int]],
          elements: Sequence[Any]) -> tuple[list[Any], bool, Exception | None]:
    """Where a repartition over ``n`` partitions sends each element: (the routes, whether each
    route is one int index rather than a list of them, the error that stopped the routing or
    None). ``fn(element, n)`` is the user's function, called once per element in one C-level
    ``map``; when every answer is an int they are the indexes (modulo ``n``), otherwise each
    answer becomes a list of indexes by ``indexes(answer, element)`` (the grouping's checks and
    errors). After an error, the routes of the elements before the bad one come with it, as the
    engine's emit sends the tuples before a grouping's error (and, as there, the function is
    called again on those one by one)."""
    try:
        answers = list(map(fn, elements, repeat(n)))
    except Exception:
        answers = []
        for x in elements:
            try:
                answers.append(fn(x, n))
            except Exception as e:
                return _as_lists(answers, elements, indexes)[0], False, e
    if not answers or set(map(type, answers)) == {int}:
        if answers and (min(answers) < 0 or max(answers) >= n):
            answers = [a % n for a in answers]
        return answers, True, None
    out, error = _as_lists(answers, elements, indexes)
    return out, False, error


def _as_lists(answers: list[Any], elements: Sequence[Any],
              indexes: Callable[[Any, Any], list[int]]) -> tuple[list[Any], Exception | None]:
    """Each answer as a list of indexes, up to the first one ``indexes`` refuses (its error)."""
    out: list[Any] = []
    for a, x in zip(answers, elements, strict=False):  # the answers may stop short of the elements
        try:
            out.append(indexes(a, x))
        except Exception as e:
            return out, e
    return out, None


def count_keys_routed(key_fn: Callable[[Any], Any], elements: Sequence[Any], routes: Sequence[Any], single: bool,
                      on_error: Callable[[Any, Exception], None]) -> list[tuple[Any, int, int]]:
    """``count_keys`` per (partition, key): (key, count, partition) triples, in the order the
    (partition, key) pairs first appear, where ``routes[i]`` is the partition of
    ``elements[i]`` (``single``) or a list of its partitions (an element in two partitions
    counted in each). ``key_fn`` is called once per element; an element it raises on, or whose
    key is not hashable, goes to ``on_error(element, error)`` and is not counted. Pure."""
    keys: list[Any] = []
    skipped = apply_map(key_fn, elements, keys, on_error)
    elements, routes = _without(elements, skipped), _without(routes, skipped)
    if single:
        try:  # the usual: one partition per element, counted in C
            return [(k, n, p) for (p, k), n in Counter(zip(routes, keys, strict=True)).items()]
        except TypeError:  # an unhashable key: counted one by one below, to name its element
            routes = [(p,) for p in routes]
    counts: dict[tuple[int, Any], int] = {}
    for element, key, parts in zip(elements, keys, routes, strict=True):
        try:
            for p in parts:
                counts[p, key] = counts.get((p, key), 0) + 1
        except TypeError as e:
            on_error(element, e)
    return [(k, n, p) for (p, k), n in counts.items()]
