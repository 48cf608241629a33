"""Tuples as heronpy shapes them.

``Tuple`` is heronpy's public five-field tuple (what users build in their own unit tests);
``HeronTuple`` is what a running bolt receives: the same five fields plus ``creation_time``
and ``roots``, as Heron's instance makes them. Both print as ``Tuple(...)``, as in Heron.
"""

from __future__ import annotations

import time
from collections import namedtuple
from typing import Any

Tuple = namedtuple("Tuple", "id component stream task values")

# The two extra fields default so five-argument construction still works; the runtime builds
# these with tuple.__new__ and all seven values, so the defaults cost nothing per tuple.
HeronTuple = namedtuple("Tuple", "id component stream task values creation_time roots",  # type: ignore[name-match]
                        defaults=(0.0, None))
# Both classes are named "Tuple" (repr as in Heron) but pickle must find this one by its own
# module attribute, not heronpy's five-field Tuple.
HeronTuple.__qualname__ = "HeronTuple"


class TrackedTuple(HeronTuple):
    """A tuple received in at-least-once mode. ``roots`` holds its ids: one
    (spout task, root id, id) triple per root it descends from; ``ack_val`` is the XOR of the
    edge ids its anchored children took, which its ack carries to the roots' tracker."""

    # a class default, so a received tuple costs no attribute store (nor an instance dict)
    # until an anchored emit XORs an edge into it
    ack_val: int = 0


class TupleHelper:
    TICK_TUPLE_ID = "__tick"
    TICK_SOURCE_COMPONENT = "__system"

    @staticmethod
    def make_tuple(stream: Any, tuple_key: Any, values: Any, roots: Any = None) -> Any:
        """``stream`` has ``id`` and ``component_name`` (or ``component``), as Heron's StreamId."""
        component_name = stream.component_name if hasattr(stream, "component_name") else stream.component
        return HeronTuple(id=str(tuple_key), component=component_name, stream=stream.id, task=None,
                          values=values, creation_time=time.time(), roots=roots)

    @staticmethod
    def make_tick_tuple() -> Any:
        return HeronTuple(id=TupleHelper.TICK_TUPLE_ID, component=TupleHelper.TICK_SOURCE_COMPONENT,
                          stream=TupleHelper.TICK_TUPLE_ID, task=None, values=None,
                          creation_time=time.time(), roots=None)

    @staticmethod
    def make_root_tuple_info(stream_id: str, tuple_id: Any) -> Any:
        return (stream_id, tuple_id, time.time())
