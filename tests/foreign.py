"""A line of ours that quotes another library's words, compared with our words verbatim and
the library's by their type only.

Our messages are asserted word for word; the text of a redis-py, libpq, pika or librdkafka
exception inside them is not ours and changes between their releases (redis-py 8's timeout
names the address where 7 said "socket"). ``Ours("... (", Foreign("TimeoutError"), "); retrying")``
equals a string that has exactly our parts around any non-empty text of the library, so
``assert line == Ours(...)`` (and lists of them) fails on any change of ours and on none of
theirs."""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Foreign:
    """Another library's text: ``"TYPE: any text"`` when a type name is given (the type is
    asserted, the words are not), else any non-empty text."""

    type_name: str | None = None

    def pattern(self) -> str:
        if self.type_name is None:
            return r".+?"
        return re.escape(self.type_name) + r": .+?"


class Ours:
    """Equal to a string made of the given parts: ``str`` parts verbatim, ``Foreign`` parts as
    the library's text."""

    def __init__(self, *parts: str | Foreign) -> None:
        if not any(isinstance(p, Foreign) for p in parts):
            raise ValueError("Ours(...) without a Foreign part: compare the string itself")
        self.parts = parts
        self._re = re.compile("".join(p.pattern() if isinstance(p, Foreign) else re.escape(p) for p in parts),
                              re.DOTALL)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, str) and self._re.fullmatch(other) is not None

    def __hash__(self) -> int:
        return hash(self.parts)

    def __repr__(self) -> str:
        shown = "".join(f"<{p.type_name or 'their text'}: ...>" if isinstance(p, Foreign) else p for p in self.parts)
        return f"Ours({shown!r})"
