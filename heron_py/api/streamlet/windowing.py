"""What the windowed operators compute from one window's elements: pure functions, no I/O."""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable
from typing import Any

from heron_py.api.streamlet.groupings import key_of

Reducer = Callable[[Any, Any], Any]


class JoinType(enum.IntEnum):
    # heronpy's JoinBolt constants
    OUTER_LEFT = 1
    INNER = 2
    OUTER_RIGHT = 3
    OUTER = 4


def reduce_values(fn: Reducer, values: list[Any]) -> Any:
    """``fn`` folded over ``values`` from the first (heronpy started from None, calling
    ``fn(None, first)``, which breaks ``lambda x, y: x + y``)."""
    result = values[0]
    for v in values[1:]:
        result = fn(result, v)
    return result


def group_by_key(where: str, elements: Iterable[Any]) -> dict[Any, list[Any]]:
    """(key, value) elements → key → values, keys in order of first appearance."""
    groups: dict[Any, list[Any]] = {}
    for element in elements:
        key = key_of(where, element)
        groups.setdefault(key, []).append(list(element)[1])
    return groups


def reduce_by_key(where: str, fn: Reducer, elements: Iterable[Any]) -> list[tuple[Any, Any]]:
    return [(key, reduce_values(fn, values)) for key, values in group_by_key(where, elements).items()]


def join_window(where: str, join_type: JoinType, fn: Reducer, left: Iterable[Any],
                right: Iterable[Any]) -> list[tuple[Any, Any]]:
    """(key, fn(left value, right value)) for every pair of values with the same key; a key
    on one side only gives fn(value, None) / fn(None, value) when the join type keeps that
    side (heronpy's semantics)."""
    lefts = group_by_key(where, left)
    rights = group_by_key(where, right)
    keep_left = join_type in (JoinType.OUTER_LEFT, JoinType.OUTER)
    keep_right = join_type in (JoinType.OUTER_RIGHT, JoinType.OUTER)
    out: list[tuple[Any, Any]] = []
    for key in [*lefts, *(k for k in rights if k not in lefts)]:
        lv, rv = lefts.get(key, []), rights.get(key, [])
        if lv and rv:
            out.extend((key, fn(a, b)) for a in lv for b in rv)
        elif lv and keep_left:
            out.extend((key, fn(a, None)) for a in lv)
        elif rv and keep_right:
            out.extend((key, fn(None, b)) for b in rv)
    return out
