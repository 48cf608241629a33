"""A quicker reply reader for redis-py's pure-Python parsers, for the stream spout's client.

Without hiredis (redis-py's optional C parser) redis-py reads a reply one element at a time,
through four or five Python calls per element (its socket buffer's ``readline`` and ``read``,
the recursive ``_read_response``, the encoder). An XREADGROUP reply of 500 entries holds 2,500
elements (each entry is an array of its id and an array of field and value): profiled, that
was about 10 us an entry, the largest part of the spout's time. ``fast_parser_class`` returns a
subclass of redis-py's parser whose ``_read_response`` reads arrays of bulk strings straight
from the buffer already received (the C ``BytesIO.readline``/``read``), one Python call per
array, and hands everything else back to redis-py's own code unchanged: any other type (errors,
integers, maps, pushes, nulls), and any element not wholly received yet (redis-py's code then
reads the socket, with its timeouts and errors). With hiredis installed redis-py uses hiredis,
which is quicker still, and this reader is not used.

``FastPacker`` does the same for the commands sent (one formatting per argument rather than
redis-py's join of its whole buffer per argument: an XACK carries hundreds of ids).

It relies on private names of redis-py (``redis._parsers._RESP2Parser``/``_RESP3Parser``
and their socket buffer's ``_buffer`` BytesIO), present from redis-py 5 to 8; if they are
missing ``use_fast_protocol`` leaves the client as redis-py makes it.
"""

from __future__ import annotations

import io
from typing import Any

CRLF = b"\r\n"


def _array(bio: io.BytesIO, n: int, slow: Any) -> list[Any]:
    """``n`` elements read from ``bio``; bulk strings and arrays of them are read here, anything
    else (and anything not wholly in ``bio`` yet) by ``slow()`` from where it starts. Nested
    arrays (an entry, its fields) go on an explicit stack rather than a call each: a fifth
    quicker, measured."""
    readline, read, seek = bio.readline, bio.read, bio.seek
    stack: list[tuple[list[Any], int]] = []  # the arrays being filled, each with what it still lacks
    out: list[Any] = []
    left = n
    while True:
        while left == 0:
            if not stack:
                return out
            parent, left = stack.pop()
            parent.append(out)
            out = parent
        left -= 1
        line = readline()
        if line.endswith(CRLF):
            kind = line[:1]
            if kind == b"$":
                size = int(line[1:-2])
                if size >= 0:
                    data = read(size + 2)
                    if len(data) == size + 2:
                        out.append(data[:-2])
                        continue
                    seek(-len(data), 1)  # the value is not all here yet: redis-py's code waits for it
            elif kind == b"*":
                m = int(line[1:-2])
                if m >= 0:
                    stack.append((out, left))
                    out, left = [], m
                    continue
        seek(-len(line), 1)
        out.append(slow())


def fast_parser_class(protocol: int) -> type | None:
    """redis-py's parser for ``protocol`` (2 or 3) with the quicker array reader, or None when
    hiredis is in use or redis-py's internals differ from what it expects."""
    try:
        from redis._parsers import _RESP2Parser, _RESP3Parser
        from redis.utils import HIREDIS_AVAILABLE
    except ImportError:
        return None
    if HIREDIS_AVAILABLE:
        return None
    base: Any = _RESP3Parser if protocol == 3 else _RESP2Parser
    if not callable(getattr(base, "_read_response", None)):
        return None

    class FastArrays(base):  # type: ignore[misc]
        def _read_response(self, disable_decoding: bool = False, **kw: Any) -> Any:
            buf = getattr(self._buffer, "_buffer", None)
            # decoding to str stays redis-py's (the spout's client reads bytes)
            if type(buf) is not io.BytesIO or (self.encoder.decode_responses and not disable_decoding):
                return super()._read_response(disable_decoding=disable_decoding, **kw)
            line = buf.readline()
            if line[:1] == b"*" and line.endswith(CRLF):
                n = int(line[1:-2])
                if n >= 0:
                    slow_kw = {k: v for k, v in kw.items() if k == "timeout"}
                    return _array(buf, n, lambda: super(FastArrays, self)._read_response(
                        disable_decoding=disable_decoding, **slow_kw))
            buf.seek(-len(line), 1)
            return super()._read_response(disable_decoding=disable_decoding, **kw)

    FastArrays.__name__ = f"FastArrays{base.__name__}"
    return FastArrays


class FastPacker:
    """redis-py's command packer (``command_packer``, a Connection option) for commands whose
    arguments are all bytes, str or int, as the spout's are: one formatting per argument and one
    join. redis-py's Python packer joins its buffer again for every argument (an XACK of 500 ids
    is 500 of them); anything else (floats, memoryviews, bools) goes to redis-py's packer."""

    def __init__(self, encoding: str = "utf-8", errors: str = "strict") -> None:
        from redis import connection
        from redis._parsers import encoders

        mod: Any = connection  # redis-py is untyped
        enc: Any = encoders
        self.encoding, self.errors = encoding, errors
        self._slow: Any = mod.PythonRespSerializer(6000, enc.Encoder(encoding, errors, False).encode)

    def pack(self, *args: Any) -> list[bytes]:
        name = args[0]
        head = name.encode(self.encoding, self.errors) if type(name) is str else name
        if type(head) is not bytes or b" " in head:  # "CONFIG GET": redis-py splits the name
            return self._slow.pack(*args)  # type: ignore[no-any-return]
        parts = [b"", b"$%d\r\n%b\r\n" % (len(head), head)]
        append = parts.append
        for a in args[1:]:
            t = type(a)
            if t is bytes:
                append(b"$%d\r\n%b\r\n" % (len(a), a))
            elif t is str:
                b = a.encode(self.encoding, self.errors)
                append(b"$%d\r\n%b\r\n" % (len(b), b))
            elif t is int:
                b = b"%d" % a
                append(b"$%d\r\n%b\r\n" % (len(b), b))
            else:
                return self._slow.pack(*args)  # type: ignore[no-any-return]
        parts[0] = b"*%d\r\n" % len(args)
        return [b"".join(parts)]


def use_fast_protocol(client: Any) -> bool:
    """Makes ``client``'s connections (made from now on) read replies with the quicker reader
    and pack commands with ``FastPacker``; False when neither is used (hiredis, or redis-py's
    internals differ from what they expect)."""
    import inspect

    from redis.connection import AbstractConnection

    kwargs = client.connection_pool.connection_kwargs
    try:
        protocol = int(kwargs.get("protocol") or _default_protocol())
    except (TypeError, ValueError):
        return False
    cls = fast_parser_class(protocol)
    if cls is None:
        return False
    kwargs["parser_class"] = cls
    if "command_packer" in inspect.signature(AbstractConnection.__init__).parameters:
        kwargs["command_packer"] = FastPacker(kwargs.get("encoding", "utf-8"), kwargs.get("encoding_errors", "strict"))
    return True


def _default_protocol() -> int:
    try:
        from redis.utils import DEFAULT_RESP_VERSION
    except ImportError:  # redis-py before RESP3 was its default
        return 2
    return int(DEFAULT_RESP_VERSION)
