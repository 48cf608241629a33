"""heronpy's ``State``: a key-value store a stateful component reads and writes, saved by the
engine at checkpoints in effectively-once mode. ``HashMapState`` is heronpy's in-memory one."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator
from typing import Any


class State(ABC):
    @abstractmethod
    def put(self, key: Any, value: Any) -> None: ...

    @abstractmethod
    def get(self, key: Any) -> Any: ...

    @abstractmethod
    def enumerate(self) -> Iterator[tuple[Any, Any]]: ...

    @abstractmethod
    def clear(self) -> None: ...

    # heronpy's components also use the state as a mapping (window bolts: state['tuples'])
    def __getitem__(self, key: Any) -> Any:
        return self.get(key)

    def __setitem__(self, key: Any, value: Any) -> None:
        self.put(key, value)

    def __contains__(self, key: Any) -> bool:
        return any(k == key for k, _ in self.enumerate())


class HashMapState(State):
    def __init__(self) -> None:
        self._dict: dict[Any, Any] = {}

    def put(self, key: Any, value: Any) -> None:
        self._dict[key] = value

    def get(self, key: Any) -> Any:
        return self._dict.get(key)

    def enumerate(self) -> Iterator[tuple[Any, Any]]:
        return iter(list(self._dict.items()))

    def clear(self) -> None:
        self._dict.clear()

    def __contains__(self, key: Any) -> bool:
        return key in self._dict

    def __str__(self) -> str:  # heronpy's: examples log the state this way
        return str(self._dict)
