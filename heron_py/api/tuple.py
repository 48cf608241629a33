"""Tuples as heronpy shapes them."""

from __future__ import annotations

import time
from collections import namedtuple
from typing import Any

HeronTuple = namedtuple("HeronTuple", "id component stream task values creation_time roots")
# heronpy names the class Tuple
Tuple = HeronTuple


class TrackedTuple(HeronTuple):
    """A tuple received in at-least-once mode. ``roots`` holds its ids: one
    (spout task, root id, id) triple per root it descends from; ``ack_val`` is the XOR of the
    edge ids its anchored children took, which its ack carries to the roots' tracker."""

    ack_val: int


class TupleHelper:
    TICK_TUPLE_ID = "__tick"
    TICK_SOURCE_COMPONENT = "__system"

    @staticmethod
    def make_tuple(stream: Any, tuple_key: Any, values: Any, roots: Any = None) -> HeronTuple:
        component_name = stream.component_name if hasattr(stream, "component_name") else stream.component
        return HeronTuple(id=str(tuple_key), component=component_name, stream=stream.id, task=None,
                          values=values, creation_time=time.time(), roots=roots)

    @staticmethod
    def make_tick_tuple() -> HeronTuple:
        return HeronTuple(id=TupleHelper.TICK_TUPLE_ID, component=TupleHelper.TICK_SOURCE_COMPONENT,
                          stream=TupleHelper.TICK_TUPLE_ID, task=None, values=None,
                          creation_time=time.time(), roots=None)

    @staticmethod
    def make_root_tuple_info(stream_id: str, tuple_id: Any) -> Any:
        return (stream_id, tuple_id, time.time())
