"""heronpy's Window and KeyedWindow: what windowed operators emit beside their result."""

from __future__ import annotations

from typing import Any


class Window:
    """The bounds of one window (whole seconds since the epoch, processing time)."""

    def __init__(self, start_time: int, end_time: int) -> None:
        self._start_time = start_time
        self._end_time = end_time

    # heron-py additions (heronpy had only the private fields): Java's Window getters
    def get_start_time(self) -> int:
        return self._start_time

    def get_end_time(self) -> int:
        return self._end_time

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Window) and (self._start_time, self._end_time) == (
            other._start_time, other._end_time)

    def __hash__(self) -> int:
        return hash((self._start_time, self._end_time))

    def __repr__(self) -> str:
        # heronpy's text: log() prints it
        return f"Window {{start_time: {self._start_time}, end_time: {self._end_time}}}"


class KeyedWindow:
    """A key and the window its result was computed over."""

    def __init__(self, key: Any, window: Window) -> None:
        if not isinstance(window, Window):
            raise TypeError(f"KeyedWindow: window must be a Window, found {type(window).__name__}")
        self._key = key
        self._window = window

    def get_key(self) -> Any:
        return self._key

    def get_window(self) -> Window:
        return self._window

    def __eq__(self, other: object) -> bool:
        return isinstance(other, KeyedWindow) and (self._key, self._window) == (other._key, other._window)

    def __hash__(self) -> int:
        return hash((repr(self._key), self._window))

    def __repr__(self) -> str:
        return f"KeyedWindow {{key: {self._key}, window: {self._window}}}"
