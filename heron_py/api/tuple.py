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
    edge ids its anchored children took, which its ack carries to the roots' tracker.

    A tuple of one root (the usual case) has a ``Root`` (heron_py.runtime.tracked) as its
    ``roots``: the triple and the ack value in one typed object, which the hot paths read and
    write directly; ``ack_val`` here reads and writes that one. A tuple of several roots keeps
    a tuple of triples and its ack value in its instance dict."""

    # (the api layer does not import the runtime's Root: roots that are not a tuple of triples
    # are a Root, which carries its own ack value)
    @property
    def ack_val(self) -> int:
        roots = self.roots
        if roots is None or type(roots) is tuple:
            return int(self.__dict__.get("ack_val", 0))
        return int(roots.ack_val)

    @ack_val.setter
    def ack_val(self, value: int) -> None:
        roots = self.roots
        if roots is None or type(roots) is tuple:
            self.__dict__["ack_val"] = value
        else:
            roots.ack_val = value


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
