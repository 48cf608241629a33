"""Routers: which consumer tasks receive a tuple. Run in the emitting instance, per tuple.

Each router returns a sequence of task ids, reusing prebuilt one-element tuples so that the
common case allocates nothing.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

from heron_py.common.stable_hash import stable_hash, value_hash
from heron_py.planner.errors import TopologyError
from heron_py.planner.keygroups import default_max_parallelism, owner_index
from heron_py.planner.model import GroupingDef, GroupingKind

_CACHE_MAX = 1 << 16


class Router(Protocol):
    def choose(self, values: Sequence[Any]) -> Sequence[int]: ...


class RoutingError(Exception):
    pass


class _RoundRobin:
    """Shuffle and none: round robin from a random start (Heron does the same; cheaper than a
    random draw per tuple and evens out load exactly)."""

    def __init__(self, targets: Sequence[int], rng: random.Random) -> None:
        self._one = [(t,) for t in targets]
        self._n = len(targets)
        self._i = rng.randrange(self._n)

    def choose(self, values: Sequence[Any]) -> Sequence[int]:
        i = self._i + 1
        if i >= self._n:
            i = 0
        self._i = i
        return self._one[i]


class FieldsRouter:
    """Fields grouping: a stable hash of the grouping fields picks the key group, and the
    group's owner is the task (``heron_py.planner.keygroups``), one table lookup, so that a
    rescale moves whole groups and keyed state can follow them. Public because the emitter
    inlines its cache for the default-stream fast path."""

    def __init__(self, targets: Sequence[int], field_indices: tuple[int, ...], max_par: int | None = None) -> None:
        one = [(t,) for t in sorted(targets)]
        n = len(targets)
        m = max_par if max_par is not None else default_max_parallelism(n)
        if m < n:
            raise TopologyError(f"fields grouping onto {n} tasks: expected at most "
                                f"topology.component.max.parallelism ({m}) tasks, found {n}")
        # group -> its owner's one-element tuple: the choice is one index, as h % n was
        self._by_group = [one[owner_index(g, n, m)] for g in range(m)]
        self._m = m
        self._idx = field_indices
        self._single = field_indices[0] if len(field_indices) == 1 else None
        self._cache: dict[str, tuple[int]] = {}

    @property
    def single_index(self) -> int | None:
        return self._single

    @property
    def cache(self) -> dict[str, tuple[int]]:
        """str key -> chosen task; cleared in place when full, so a holder's reference stays valid."""
        return self._cache

    def choose(self, values: Sequence[Any]) -> Sequence[int]:
        if self._single is not None:
            key = values[self._single]
            hit = self._cache.get(key) if type(key) is str else None
            if hit is not None:
                return hit
            chosen = self._by_group[value_hash(key) % self._m]
            if type(key) is str:
                # keys repeat (words, user ids): one dict lookup instead of encode + CRC;
                # bounded, and cleared rather than evicted, to stay cheap
                if len(self._cache) >= _CACHE_MAX:
                    self._cache.clear()
                self._cache[key] = chosen
            return chosen
        return self._by_group[stable_hash([values[i] for i in self._idx]) % self._m]


class _Fixed:
    def __init__(self, targets: tuple[int, ...]) -> None:
        self._targets = targets

    def choose(self, values: Sequence[Any]) -> Sequence[int]:
        return self._targets


class _PartialKey:
    """Two candidates per key from two independent hashes; the one this emitter has sent
    fewer tuples to wins (Storm's PartialKeyGrouping, least-loaded by local counts)."""

    def __init__(self, targets: Sequence[int], field_indices: tuple[int, ...]) -> None:
        self._targets = sorted(targets)
        self._one = [(t,) for t in self._targets]
        self._n = len(targets)
        self._idx = field_indices
        self._load = [0] * self._n

    def candidates(self, values: Sequence[Any]) -> tuple[int, int]:
        """Indices (into the sorted targets) of the key's two tasks; distinct when there are
        two or more targets, so a hot key always has somewhere else to go."""
        key = [values[i] for i in self._idx]
        n = self._n
        h1 = stable_hash(key) % n
        if n == 1:
            return h1, h1
        # the second choice is an offset of 1..n-1 from the first, from an independent hash
        h2 = (h1 + 1 + stable_hash(["\x00partial-key-2", *key]) % (n - 1)) % n
        return h1, h2

    def choose(self, values: Sequence[Any]) -> Sequence[int]:
        a, b = self.candidates(values)
        i = a if self._load[a] <= self._load[b] else b
        self._load[i] += 1
        return self._one[i]


class _LocalOrShuffle(_RoundRobin):
    def __init__(self, targets: Sequence[int], local: frozenset[int], rng: random.Random) -> None:
        near = [t for t in targets if t in local]
        super().__init__(near or list(targets), rng)


class _Custom:
    def __init__(self, custom: Any, targets: Sequence[int]) -> None:
        self._custom = custom
        self._targets = frozenset(targets)
        self._sorted = sorted(targets)
        # a grouping of ours may choose for a whole batch in one call (the Streamlet ones)
        many = getattr(custom, "choose_tasks_many", None)
        self._many: Callable[[Sequence[Sequence[Any]]], list[Sequence[int]]] | None = (
            many if callable(many) else None)
        # and for a one-field stream's values given bare (Emitter.emit_one_many)
        one_many = getattr(custom, "choose_tasks_one_many", None)
        self._one_many: Callable[[Sequence[Any]], list[Any]] | None = one_many if callable(one_many) else None

    def choose(self, values: Sequence[Any]) -> Sequence[int]:
        chosen = self._custom.choose_tasks(values)
        for t in chosen:
            if t not in self._targets:
                raise RoutingError(self._not_subscribed(t))
        return chosen  # type: ignore[no-any-return]

    def choose_many(self, values_list: Sequence[Sequence[Any]]) -> list[Sequence[int]]:
        """``choose`` for each of a batch's values, in one call of the grouping's
        ``choose_tasks_many`` when it has one; every chosen task checked in one set operation."""
        many = self._many
        if many is None:
            choose = self.choose
            return [choose(v) for v in values_list]
        chosen = many(values_list)
        self._check_batch(chosen, len(values_list), itertools.chain.from_iterable(chosen))
        return chosen

    def choose_one_many(self, values: Sequence[Any]) -> list[Any] | None:
        """For a one-field stream's tuples given as their bare values, the grouping's
        ``choose_tasks_one_many``: per value a task id (int), or a tuple of them; every task
        checked in one set operation. None when the grouping has no such method."""
        many = self._one_many
        if many is None:
            return None
        chosen = many(values)
        self._check_batch(chosen, len(values), chosen)  # a tuple among the ints is no target: checked per task
        return chosen

    def _check_batch(self, chosen: Sequence[Any], n: int, every_task: Iterable[Any]) -> None:
        """A batch choice (per tuple a sequence of task ids, or one id) holds ``n`` answers and
        only subscribed tasks: ``every_task`` checked in one set operation, then task by task
        only when that finds one that is not (to name it)."""
        if len(chosen) != n:
            raise RoutingError(f"custom grouping {type(self._custom).__name__} chose for {len(chosen)} tuples "
                               f"of a batch of {n}")
        targets = self._targets
        if not targets.issuperset(every_task):
            for tasks in chosen:
                for t in ((tasks,) if type(tasks) is int else tasks):
                    if t not in targets:
                        raise RoutingError(self._not_subscribed(t))

    def _not_subscribed(self, t: Any) -> str:
        return (f"custom grouping {type(self._custom).__name__} chose task {t!r}, which is not one of "
                f"the subscribed tasks {self._sorted}")


def choose_many(router: Router, values_list: Sequence[Sequence[Any]]) -> list[Sequence[int]]:
    """The tasks chosen for each of a batch's values, in order: the router's own batch choice
    when it has one (a custom grouping's ``choose_tasks_many``), else ``choose`` per values."""
    many = getattr(router, "choose_many", None)
    if many is not None:
        return many(values_list)  # type: ignore[no-any-return]
    choose = router.choose
    return [choose(v) for v in values_list]


def check_direct(task: Any, target_tasks: Sequence[int]) -> None:
    if task not in target_tasks:
        raise RoutingError(f"direct emit to task {task!r}, which is not one of the subscribed tasks "
                           f"{sorted(target_tasks)}")


def make_router(
    grouping: GroupingDef,
    *,
    target_tasks: Sequence[int],
    local_tasks: frozenset[int],
    field_indices: tuple[int, ...],
    custom: Any = None,
    rng: random.Random | None = None,
    source_task: int = 0,
    max_par: int | None = None,
) -> Router:
    if not target_tasks:
        raise TopologyError("a grouping needs at least one target task")
    rng = rng or random.Random()
    targets = sorted(target_tasks)
    kind = grouping.kind
    if kind in (GroupingKind.SHUFFLE, GroupingKind.NONE):
        return _RoundRobin(targets, rng)
    if kind is GroupingKind.FIELDS:
        return FieldsRouter(targets, field_indices, max_par)
    if kind is GroupingKind.ALL:
        return _Fixed(tuple(targets))
    if kind is GroupingKind.LOWEST:
        return _Fixed((targets[0],))
    if kind is GroupingKind.LOCAL_OR_SHUFFLE:
        return _LocalOrShuffle(targets, local_tasks, rng)
    if kind is GroupingKind.PARTIAL_KEY:
        return _PartialKey(targets, field_indices)
    if kind is GroupingKind.CUSTOM:
        if custom is None:
            raise TopologyError("custom grouping without its ICustomGrouping object")
        return _Custom(custom, targets)
    # DIRECT: the emitter names the task (emit(..., direct_task=t)); check it with check_direct
    raise TopologyError(f"grouping '{kind.value}' has no router: a direct stream's tuples go to the task the "
                        f"emitter names with direct_task, checked by check_direct()")
