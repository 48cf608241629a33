"""The custom groupings of streamlet stages. Each is pickled into the plan by reference (a
module-level class) with its user function already cloudpickled."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from heron_py.api.custom_grouping import ICustomGrouping
from heron_py.api.streamlet.errors import StreamletError
from heron_py.common.serialization import loads_user_object
from heron_py.common.stable_hash import value_hash


def key_of(where: str, element: Any) -> Any:
    """The key of a (key, value) element, or one error naming the operator."""
    if isinstance(element, (str, bytes)) or not isinstance(element, Iterable):
        raise StreamletError(f"{where}: expected (key, value) pairs, found {element!r}")
    pair = list(element)
    if len(pair) != 2:
        raise StreamletError(f"{where}: expected (key, value) pairs, found {element!r} ({len(pair)} items)")
    return pair[0]


class KeyGrouping(ICustomGrouping):
    """Sends a (key, value) element to the task its key hashes to. The hash is the engine's
    stable one: heronpy used Python's hash(), which differs between processes for str keys,
    so one key could reach two reducer tasks."""

    def __init__(self, operator: str) -> None:
        self.operator = operator
        self.target_tasks: list[int] = []
        self._one: list[tuple[int]] = []

    def prepare(self, context: Any, component: str, stream: str, target_tasks: list[int]) -> None:
        self.target_tasks = sorted(target_tasks)
        self._one = [(t,) for t in self.target_tasks]

    def choose_tasks(self, values: Any) -> list[int]:
        key = key_of(self.operator, values[0])
        return [self.target_tasks[value_hash(key) % len(self.target_tasks)]]

    def choose_tasks_many(self, values_list: Sequence[Any]) -> list[Sequence[int]]:
        """``choose_tasks`` for a batch (a combiner's (key, count) pairs): a 2-tuple's key
        hashed in one loop, anything else through ``choose_tasks`` (its checks and errors)."""
        one = self._one
        n = len(one)
        choose = self.choose_tasks
        out: list[Sequence[int]] = []
        append = out.append
        for values in values_list:
            pair = values[0]
            if type(pair) is tuple and len(pair) == 2:
                append(one[value_hash(pair[0]) % n])
            else:
                append(choose(values))
        return out


class CombinedKeyGrouping(KeyGrouping):
    """A combiner's (key, count, partition) triples (combine.py), from the repartition between
    it and the count_by_key, to the task their key hashes to (as ``KeyGrouping`` sends a pair)."""

    def choose_tasks(self, values: Any) -> list[int]:
        return [self.target_tasks[value_hash(values[0][0]) % len(self.target_tasks)]]

    def choose_tasks_many(self, values_list: Sequence[Any]) -> list[Sequence[int]]:
        one = self._one
        n = len(one)
        return [one[value_hash(values[0][0]) % n] for values in values_list]


class PartitionIndexGrouping(ICustomGrouping):
    """A combiner's (key, count, partition) triples to the repartition's task of that index:
    the source's task already called the repartition function on each element (combine.py)."""

    def __init__(self, operator: str) -> None:
        self.operator = operator
        self._one: list[tuple[int]] = []

    def prepare(self, context: Any, component: str, stream: str, target_tasks: list[int]) -> None:
        self._one = [(t,) for t in sorted(target_tasks)]

    def choose_tasks(self, values: Any) -> list[int]:
        return list(self._one[values[0][2]])

    def choose_tasks_many(self, values_list: Sequence[Any]) -> list[Sequence[int]]:
        one = self._one
        return [one[values[0][2]] for values in values_list]


class _FunctionGrouping(ICustomGrouping):
    """A grouping by a user function, cloudpickled into the plan and loaded in the task."""

    def __init__(self, operator: str, packed_fn: bytes) -> None:
        self.operator = operator
        self.packed_fn = packed_fn
        self.target_tasks: list[int] = []
        self._one: list[tuple[int]] = []  # a one-task answer per target, built once: the batch choices reuse them
        self._fn: Any = None

    def prepare(self, context: Any, component: str, stream: str, target_tasks: list[int]) -> None:
        self.target_tasks = sorted(target_tasks)
        self._one = [(t,) for t in self.target_tasks]
        self._fn = loads_user_object(self.packed_fn)


class RepartitionGrouping(_FunctionGrouping):
    """``fn(element, num_partitions)`` → a partition index or an iterable of them (taken
    modulo the partition count, as heronpy)."""

    def choose_tasks_many(self, values_list: Sequence[Any]) -> list[Sequence[int]]:
        """``choose_tasks`` for a batch of one-value rows (an operator's outputs that another
        emit path gives as rows): ``choose_tasks_one_many`` over their values, the function once
        per element, each single task as a one-task tuple."""
        return [(t,) if type(t) is int else t for t in self.choose_tasks_one_many([v[0] for v in values_list])]

    def choose_tasks_one_many(self, elements: Sequence[Any]) -> list[Any]:
        """``choose_tasks_many`` for elements given bare (the engine's emit of a one-field
        stream's values, ``Emitter.emit_one_many``): per element its task id, or a tuple of task
        ids when the function answers with several partitions (its checks and errors are
        ``choose_tasks``'s)."""
        tasks = self.target_tasks
        n = len(tasks)
        fn = self._fn
        out: list[Any] = []
        append = out.append
        for x in elements:
            chosen = fn(x, n)
            if type(chosen) is int:
                append(tasks[chosen % n])
            else:
                append(tuple(tasks[i] for i in self.indexes(chosen, x)))
        return out

    def choose_tasks(self, values: Any) -> list[int]:
        tasks = self.target_tasks
        n = len(tasks)
        chosen = self._fn(values[0], n)
        if type(chosen) is int:  # the common answer, once per element: no ABC check, no loop
            return [tasks[chosen % n]]
        return [tasks[i] for i in self.indexes(chosen, values[0])]

    def indexes(self, chosen: Any, element: Any) -> list[int]:
        """The partition indexes (0..n-1) of the function's answer ``chosen`` for ``element``,
        or one error naming the operator, the answer and the element."""
        indexes = list(chosen) if isinstance(chosen, Iterable) and not isinstance(chosen, (str, bytes)) else [chosen]
        for i in indexes:
            if isinstance(i, bool) or not isinstance(i, int):
                raise StreamletError(f"{self.operator}: the repartition function must return a partition index "
                                     f"(int) or a list of them, found {chosen!r} for element {element!r}")
        n = len(self.target_tasks)
        return [i % n for i in indexes]

    def function(self) -> Callable[[Any, int], Any]:
        """The user's function, loaded in ``prepare``."""
        return self._fn  # type: ignore[no-any-return]


class KeyFunctionGrouping(_FunctionGrouping):
    """Sends each element to the task ``key_fn(element)`` hashes to (the engine's stable hash),
    so every key lives in one task of a keyed operator. An element whose key function raises
    goes to the first task, whose bolt calls the function again and fails that tuple alone
    with one log line: raising here would stop the upstream task instead."""

    def choose_tasks(self, values: Any) -> list[int]:
        tasks = self.target_tasks
        try:
            return [tasks[value_hash(self._fn(values[0])) % len(tasks)]]
        except Exception:
            return [tasks[0]]

    def choose_tasks_many(self, values_list: Sequence[Any]) -> list[Sequence[int]]:
        """``choose_tasks`` for a batch, in one loop (an element whose key function raises goes
        to the first task, as there)."""
        one = self._one
        n = len(one)
        fn = self._fn
        out: list[Sequence[int]] = []
        append = out.append
        for values in values_list:
            try:
                append(one[value_hash(fn(values[0])) % n])
            except Exception:
                append(one[0])
        return out
