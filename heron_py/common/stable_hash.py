"""A hash of tuple values that every process and every run agrees on.

Python's ``hash`` of str/bytes changes with PYTHONHASHSEED, so fields grouping cannot use
it. Rules: str → CRC-32 of its UTF-8; bytes → CRC-32; bool/int → CRC-32 of the decimal
text (so True hashes like 1, as Python's == says); float → CRC-32 of repr (an integral float
hashes like the int, 1.0 like 1); None → 0; list/tuple → the element hashes combined in
order (a one-element list hashes like its element). Other types hash by repr, which is stable
only if their repr is: fine for dataclasses, namedtuples, Decimal, datetime; not for objects
whose repr shows an address (``<Foo object at 0x...>``), nor for a set of strings, whose order
varies with PYTHONHASHSEED — group on plain values instead.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from typing import Any

_crc = zlib.crc32


def value_hash(v: Any) -> int:
    t = type(v)
    if t is str:
        return _crc(v.encode("utf-8"))
    if t is int or t is bool:
        return _crc(str(int(v)).encode())
    if t is bytes:
        return _crc(v)
    if t is float:
        return _crc(str(int(v)).encode()) if v.is_integer() else _crc(repr(v).encode())
    if v is None:
        return 0
    if isinstance(v, (list, tuple)):
        return stable_hash(v)
    if isinstance(v, str):
        return _crc(str(v).encode("utf-8"))
    if isinstance(v, int):
        return _crc(str(int(v)).encode())
    return _crc(repr(v).encode("utf-8"))


def stable_hash(values: Sequence[Any]) -> int:
    """The hash of the selected field values of a tuple, 0 <= h < 2**32.

    One field (the common fields grouping) is just that value's hash, so routers may call
    ``value_hash`` directly and agree with this. More fields are combined FNV-style, in order.
    """
    if len(values) == 1:
        return value_hash(values[0])
    h = 0x811C9DC5
    for v in values:
        h = ((h ^ value_hash(v)) * 0x01000193) & 0xFFFFFFFF
    return h
