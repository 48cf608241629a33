"""User functions and objects that travel to other processes: cloudpickled at build, into
the component's config, and loaded in the task's initialize().

cloudpickle serializes lambdas, closures and whatever the topology file (``__main__``)
defines by value, which plain pickle cannot; objects of importable modules stay references.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any

import cloudpickle

from heron_py.api.streamlet.errors import StreamletError
from heron_py.common.serialization import loads_user_object


def check_callable(where: str, what: str, fn: Any) -> None:
    if not callable(fn):
        raise StreamletError(f"{where}: {what} must be callable, found {fn!r} ({type(fn).__name__})")


def check_arity(where: str, what: str, fn: Callable[..., Any], n: int) -> None:
    """Refuses a function that cannot be called with ``n`` positional arguments (when its
    signature can be read: builtins may not tell)."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return
    try:
        sig.bind(*range(n))
    except TypeError:
        raise StreamletError(f"{where}: {what} must take {n} argument{'s' if n != 1 else ''}, "
                             f"found {getattr(fn, '__name__', fn)}{sig}") from None


def pack(where: str, obj: Any) -> bytes:
    try:
        data: bytes = cloudpickle.dumps(obj)
    except Exception as e:
        raise StreamletError(f"{where}: {type(obj).__name__} {getattr(obj, '__name__', '')!s} cannot be "
                             f"serialized to run in other processes ({type(e).__name__}: {e}); expected a "
                             f"function or object without open files, sockets, locks or threads") from e
    return data


def unpack(config: Mapping[str, Any], key: str, component: str) -> Any:
    """The object ``pack`` stored under ``key``; raises naming the component when it is missing."""
    data = config.get(key)
    if not isinstance(data, bytes):
        raise StreamletError(f"streamlet component '{component}': config key '{key}' must hold the packed "
                             f"user function (bytes), found {type(data).__name__}; was the topology built by "
                             f"heron_py.api.streamlet?")
    return loads_user_object(data)
