"""The two framings of multilang messages (pure: bytes in, values out).

JSON, Storm's default: each message is JSON text followed by a line ``end``
(``{"command": "sync"}\\nend\\n``); the text may span lines. msgpack, as pystorm offers it:
messages are msgpack values back to back, delimited by msgpack itself.

A decoder is fed whatever the pipe gave (any chunking) and returns the complete values. It
raises ProtocolError, at once, on: a message over ``max_bytes`` (counted before its end is
seen, so a subprocess cannot make us buffer without bound), text that is not JSON (a first
line that cannot start a JSON message is refused as soon as it is complete), bytes that are
not msgpack, and — at ``finish()``, when the pipe closed — a message left without its end.
"""

from __future__ import annotations

import json
from typing import Any, Protocol

import msgpack

from heron_py.multilang.errors import ProtocolError

LIMIT_KEY = "heron_py.shell.max.message.bytes"
DEFAULT_MAX_BYTES = 16 * 1024 * 1024
SERIALIZERS = ("json", "msgpack")
# the bytes a JSON value can start with: a line starting otherwise is refused before its "end"
_JSON_START = frozenset(b'{["-0123456789tfn')


def _clip(data: bytes | str, limit: int = 200) -> str:
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    return repr(text) if len(text) <= limit else repr(text[:limit]) + f" ... ({len(text)} chars)"


def _over(n: int, max_bytes: int) -> ProtocolError:
    return ProtocolError(f"multilang: a message from the subprocess is over the size limit: {n} bytes read "
                         f"without its end, limit {max_bytes} bytes ({LIMIT_KEY})")


class Decoder(Protocol):
    def feed(self, data: bytes) -> list[Any]: ...

    def finish(self) -> None: ...


class JsonDecoder:
    """Lines until a line ``end``; the lines before it (joined by newlines) are one JSON value."""

    def __init__(self, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.max_bytes = max_bytes
        self._partial = bytearray()  # the current line, before its newline
        self._lines: list[bytes] = []  # the current message's complete lines
        self._size = 0  # bytes in _lines, with their newlines

    def feed(self, data: bytes) -> list[Any]:
        out: list[Any] = []
        self._partial += data
        start = 0
        buf = self._partial
        while True:
            nl = buf.find(b"\n", start)
            if nl < 0:
                break
            value = self._line(bytes(buf[start:nl]))
            if value is not _NOTHING:
                out.append(value)
            start = nl + 1
        del buf[:start]
        if self._size + len(buf) > self.max_bytes:
            raise _over(self._size + len(buf), self.max_bytes)
        return out

    def _line(self, line: bytes) -> Any:
        if line.endswith(b"\r"):
            line = line[:-1]  # Storm's readLine takes "\r\n" too
        if line == b"end":
            return self._message()
        if not self._lines:
            head = line.lstrip()
            if not head:
                return _NOTHING  # blank lines between messages: pystorm skips them as well
            if not _could_start_json(head):
                raise ProtocolError(f"multilang: the subprocess wrote a line that is not JSON: {_clip(line)}; "
                                    f"expected JSON messages each followed by a line \"end\"")
        self._lines.append(line)
        self._size += len(line) + 1
        if self._size > self.max_bytes:
            raise _over(self._size, self.max_bytes)
        return _NOTHING

    def _message(self) -> Any:
        raw = b"\n".join(self._lines)
        self._lines, self._size = [], 0
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise ProtocolError(f"multilang: a message from the subprocess is not UTF-8 ({e.reason} at byte "
                                f"{e.start}); found {_clip(raw)}") from None
        try:
            return json.loads(text)
        except json.JSONDecodeError as e:
            raise ProtocolError(f"multilang: a message from the subprocess is not JSON ({e.msg}: line {e.lineno} "
                                f"column {e.colno}); expected one JSON value before the line \"end\", "
                                f"found {_clip(text)}") from None

    def finish(self) -> None:
        if self._lines or self._partial.strip():
            text = b"\n".join([*self._lines, *([bytes(self._partial)] if self._partial else [])])
            raise ProtocolError(f"multilang: the subprocess's output ended inside a message: {_clip(text)} "
                                f"has no line \"end\" after it")


class MsgpackDecoder:
    """msgpack values back to back (pystorm's MsgpackSerializer)."""

    def __init__(self, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.max_bytes = max_bytes
        # the buffer may hold one incomplete message (<= max_bytes) plus one fed slice
        self._unpacker = msgpack.Unpacker(raw=False, strict_map_key=False, max_buffer_size=2 * max_bytes + 1)
        self._fed = 0  # bytes fed
        self._end = 0  # where the last complete value ended

    def feed(self, data: bytes) -> list[Any]:
        out: list[Any] = []
        view = memoryview(data)
        for i in range(0, len(view), self.max_bytes):  # slices keep the buffer within its bound
            piece = view[i:i + self.max_bytes]
            self._unpacker.feed(piece)
            self._fed += len(piece)
            try:
                for value in self._unpacker:
                    out.append(value)
                    # tell() is exact only between values (it counts a partial value's bytes read)
                    self._end = self._unpacker.tell()
            except (ValueError, msgpack.exceptions.UnpackException) as e:
                raise ProtocolError(f"multilang: a message from the subprocess is not msgpack "
                                    f"({type(e).__name__}: {e}); expected msgpack values back to back, "
                                    f"found {_clip(bytes(piece))}") from None
            pending = self._fed - self._end
            if pending > self.max_bytes:
                raise _over(pending, self.max_bytes)
        return out

    def finish(self) -> None:
        pending = self._fed - self._end
        if pending:
            raise ProtocolError(f"multilang: the subprocess's output ended inside a message: {pending} bytes of "
                                f"an incomplete msgpack value")


def _could_start_json(head: bytes) -> bool:
    if head[0] not in _JSON_START:
        return False
    for word in (b"true", b"false", b"null"):
        if head[:1] == word[:1]:
            n = min(len(word), len(head))
            return head[:n] == word[:n]
    return True


class _Nothing:
    pass


_NOTHING: Any = _Nothing()


def encode(value: Any, serializer: str) -> bytes:
    """One message in ``serializer``'s framing. TypeError (what could not be encoded) if the
    value holds something the framing cannot carry."""
    if serializer == "json":
        try:
            text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
        except (TypeError, ValueError) as e:
            raise TypeError(f"multilang: cannot send {_clip(repr(value))} as JSON ({e}); tuple values for a "
                            f"shell component must be JSON values (str, number, bool, None, list, dict)") from None
        return text.encode("utf-8") + b"\nend\n"
    try:
        return bytes(msgpack.packb(value, use_bin_type=True))
    except (TypeError, ValueError, OverflowError) as e:
        raise TypeError(f"multilang: cannot send {_clip(repr(value))} as msgpack ({e})") from None


def decoder(serializer: str, max_bytes: int = DEFAULT_MAX_BYTES) -> Decoder:
    check_serializer(serializer)
    return JsonDecoder(max_bytes) if serializer == "json" else MsgpackDecoder(max_bytes)


def check_serializer(serializer: object, where: str = "shell component") -> str:
    if serializer not in SERIALIZERS:
        raise ValueError(f"{where}: serializer must be one of {', '.join(SERIALIZERS)}; found {serializer!r}")
    assert isinstance(serializer, str)
    return serializer
