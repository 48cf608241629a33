"""Serialization of tuple batches and of user objects inside the topology package.

A batch body is a pickled list of rows ``(stream, values)``. Only authenticated peers can
send a batch (see handshake), so pickle is acceptable on this path; it is the fastest
serializer CPython has for plain values.
"""

from __future__ import annotations

import importlib
import io
import pickle
import sys
from typing import Any

MAIN_ALIAS = "__heron_main__"
PROTOCOL = pickle.HIGHEST_PROTOCOL


def dumps_batch(rows: list[Any]) -> bytes:
    return pickle.dumps(rows, PROTOCOL)


def loads_batch(body: bytes | memoryview) -> list[Any]:
    rows: list[Any] = pickle.loads(body)
    return rows


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
