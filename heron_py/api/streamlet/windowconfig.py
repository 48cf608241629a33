"""heronpy's WindowConfig: the length and slide of a processing-time window, whole seconds."""

from __future__ import annotations

import datetime
from typing import Any

from heron_py.api.streamlet.errors import StreamletError


def _whole_seconds(what: str, value: Any) -> int:
    """``value`` (an int or a timedelta) in whole seconds >= 1; heronpy's window bolts tick in
    whole seconds, so a fraction cannot be honoured."""
    if isinstance(value, datetime.timedelta):
        seconds = value.total_seconds()
        if seconds != int(seconds):
            raise StreamletError(f"WindowConfig: {what} must be whole seconds (Python windowing has second "
                                 f"resolution), found {value!r}")
        value = int(seconds)
    if isinstance(value, bool) or not isinstance(value, int):
        raise StreamletError(f"WindowConfig: {what} must be an int of seconds or a datetime.timedelta, "
                             f"found {value!r}")
    if value < 1:
        raise StreamletError(f"WindowConfig: {what} must be at least 1 second, found {value}")
    return value


class WindowConfig:
    """A sliding window of ``window_duration`` seconds, computed every ``slide_interval``
    seconds; tumbling when both are equal."""

    def __init__(self, window_duration: Any, slide_interval: Any) -> None:
        self._duration_secs = _whole_seconds("window duration", window_duration)
        self._slide_secs = _whole_seconds("slide interval", slide_interval)
        if self._slide_secs > self._duration_secs:
            raise StreamletError(f"WindowConfig: slide interval ({self._slide_secs} s) must not be longer than "
                                 f"the window duration ({self._duration_secs} s)")
        # heronpy's attribute names (timedelta), read by code that peeks at them
        self._window_duration = datetime.timedelta(seconds=self._duration_secs)
        self._slide_interval = datetime.timedelta(seconds=self._slide_secs)

    @property
    def duration_secs(self) -> int:
        return self._duration_secs

    @property
    def slide_secs(self) -> int:
        return self._slide_secs

    @staticmethod
    def create_tumbling_window(window_duration: Any) -> WindowConfig:
        return WindowConfig(window_duration, window_duration)

    @staticmethod
    def create_sliding_window(window_duration: Any, slide_interval: Any) -> WindowConfig:
        return WindowConfig(window_duration, slide_interval)

    def __repr__(self) -> str:
        return f"WindowConfig(duration={self._duration_secs}s, slide={self._slide_secs}s)"


def TimeWindow(window_duration: Any, slide_interval: Any) -> WindowConfig:
    """What Heron's pulsar_word_count_streamlet.py imports from heronpy.streamlet.streamlet
    (an older Streamlet API's name, absent from heronpy's last release): a sliding window."""
    return WindowConfig.create_sliding_window(window_duration, slide_interval)
