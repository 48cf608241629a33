"""Serialization of tuple batches and of user objects inside the topology package.

A batch body is a pickle of ``(rows, values, ids)``:

* ``rows``: a list of rows ``(stream, values)`` or ``(stream, values, roots)`` (at least once:
  ``roots`` is a tuple of ``(spout task, root id, tuple id)``), or runs ``(stream, None, None,
  [values, ...])``: untracked tuples of one stream in a row, the stream named once (a batch
  emit's outputs), or ``(stream, None, ONE, [value, ...])``: the same for a one-field stream,
  each tuple as its one value, bare (the Streamlet operators' "output" stream: no tuple per
  element is built, pickled or unpickled), or None;
* ``values``: a list of value lists on the "default" stream, after the rows, or None; the hot
  emit paths append here, so a row costs no tuple at emit nor at encode;
* ``ids``: None, or an ``array('Q')`` holding one ``(spout task, root id, tuple id)`` triple
  per entry of ``values`` (each of those tuples then descends from one root).

The pickler runs in fast mode (no memo): batch values rarely share objects, and the memo was
a third of the encode time. A structure fast mode cannot encode (a cycle) falls back to the
plain pickler. Only authenticated peers can send a batch (see handshake), so pickle is
acceptable on this path; it is the fastest serializer CPython has for plain values.
"""

from __future__ import annotations

import importlib
import io
import pickle
import sys
from array import array
from collections.abc import Iterable, Sequence
from typing import Any

MAIN_ALIAS = "__heron_main__"
PROTOCOL = pickle.HIGHEST_PROTOCOL

Body = tuple[list[Any] | None, list[Any] | None, "array[int] | None"]


def dumps_body(rows: list[Any] | None, values: list[Any] | None, ids: array[int] | None) -> bytes:
    buf = io.BytesIO()
    p = pickle.Pickler(buf, PROTOCOL)
    p.fast = True  # deprecated alias of "no memo", still what the C pickler reads
    try:
        p.dump((rows, values, ids))
    except (ValueError, RecursionError):  # a cycle in a value: the memo handles it
        return pickle.dumps((rows, values, ids), PROTOCOL)
    return buf.getvalue()


class BodyError(ValueError):
    pass


def loads_body(body: bytes | memoryview) -> Body:
    out = pickle.loads(body)
    if type(out) is not tuple or len(out) != 3:
        raise BodyError(f"batch body: expected a (rows, values, ids) triple, found {type(out).__name__}")
    rows, values, ids = out
    if ids is not None and (values is None or len(ids) != 3 * len(values)):
        raise BodyError(f"batch body: expected 3 ids per value ({3 * len(values or ())}), found {len(ids)}")
    return rows, values, ids


def dumps_batch(rows: list[Any]) -> bytes:
    """A body of rows only (what tests and tools build)."""
    return dumps_body(rows, None, None)


def loads_batch(body: bytes | memoryview) -> list[Any]:
    """Every tuple of a body as a row ``(stream, values[, roots])``, in order."""
    return body_rows(*loads_body(body))


# the length of a run in ``rows``: (stream, None, None, values list), or (stream, None, ONE,
# one-field values list); a plain row has 2 items, a tracked row 3
RUN_LEN = 4
# a run's third item when its values are one-field tuples' values, bare
ONE = 1


def row_count(rows: list[Any]) -> int:
    """The tuples ``rows`` hold: one per row, each run's values counted."""
    if RUN_LEN not in set(map(len, rows)):
        return len(rows)
    return sum(len(r[3]) if len(r) == RUN_LEN else 1 for r in rows)


def run_tuples(run: Sequence[Any]) -> Iterable[Any]:
    """A run's values as tuples: a ``ONE`` run's bare values each wrapped in a one-value tuple
    (by ``zip``, in C), any other run's as they are."""
    return zip(run[3]) if run[2] == ONE else run[3]


def expand_runs(rows: list[Any]) -> list[Any]:
    """``rows`` with each run as its ``(stream, values)`` rows."""
    if RUN_LEN not in set(map(len, rows)):
        return rows
    out: list[Any] = []
    for r in rows:
        if len(r) == RUN_LEN:
            stream = r[0]
            out.extend((stream, v) for v in run_tuples(r))
        else:
            out.append(r)
    return out


def body_rows(rows: list[Any] | None, values: list[Any] | None, ids: array[int] | list[int] | None) -> list[Any]:
    """Every tuple of a body as a row ``(stream, values[, roots])``, in order (runs expanded)."""
    out = expand_runs(list(rows)) if rows else []
    if values:
        if ids is None:
            out.extend(("default", v) for v in values)
        else:
            it = iter(ids)
            triples = zip(it, it, it, strict=False)  # 3 ids per value: checked on load
            out.extend(("default", v, (r,)) for v, r in zip(values, triples, strict=False))
    return out


def resolve_user_name(module: str, qualname: str) -> Any:
    """The object ``module``.``qualname`` of the user's code. Module ``__main__`` (the topology
    file at submit) is the same file loaded as ``__heron_main__`` inside a container. Raises
    ImportError or AttributeError."""
    if module == "__main__" and MAIN_ALIAS in sys.modules:
        module = MAIN_ALIAS
    obj: Any = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


class _PackageUnpickler(pickle.Unpickler):
    """Resolves classes pickled from the topology file to where a container loaded it."""

    def find_class(self, module: str, name: str) -> Any:
        return resolve_user_name(module, name)


def loads_user_object(data: bytes) -> Any:
    return _PackageUnpickler(io.BytesIO(data)).load()
