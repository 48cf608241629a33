"""Serialization of tuple batches and of user objects inside the topology package.

A batch body is a pickled list of rows ``(stream, values)``. Only authenticated peers can
send a batch (see handshake), so pickle is acceptable on this path; it is the fastest
serializer CPython has for plain values.
"""

from __future__ import annotations

import importlib
import io
import pickle
from typing import Any

MAIN_ALIAS = "__heron_main__"
PROTOCOL = pickle.HIGHEST_PROTOCOL


def dumps_batch(rows: list[Any]) -> bytes:
    return pickle.dumps(rows, PROTOCOL)


def loads_batch(body: bytes | memoryview) -> list[Any]:
    rows: list[Any] = pickle.loads(body)
    return rows


class _PackageUnpickler(pickle.Unpickler):
    """Resolves classes pickled from the topology file (module ``__main__`` at submit) to the
    same file loaded as ``__heron_main__`` inside a container."""

    def find_class(self, module: str, name: str) -> Any:
        if module == "__main__":
            module = MAIN_ALIAS
        mod = importlib.import_module(module)
        obj = mod
        for part in name.split("."):
            obj = getattr(obj, part)
        return obj


def loads_user_object(data: bytes) -> Any:
    return _PackageUnpickler(io.BytesIO(data)).load()
