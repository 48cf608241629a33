"""heronpy's ArrayLooper: a Generator that cycles through a user's iterable forever."""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterable, Iterator
from typing import Any

from heron_py.api.streamlet.context import Context
from heron_py.api.streamlet.errors import StreamletError
from heron_py.api.streamlet.generator import Generator


class ArrayLooper(Generator):
    """``sleep``: seconds to wait before each element (None: none), to pace a test source."""

    def __init__(self, user_iterable: Iterable[Any], sleep: float | None = None) -> None:
        super().__init__()
        if isinstance(user_iterable, (str, bytes)) or not isinstance(user_iterable, Iterable):
            raise StreamletError(f"ArrayLooper: expected an iterable of elements (a list), found {user_iterable!r}")
        if sleep is not None and (isinstance(sleep, bool) or not isinstance(sleep, (int, float)) or sleep < 0):
            raise StreamletError(f"ArrayLooper: sleep must be None or seconds >= 0, found {sleep!r}")
        # a list: the looper is serialized to every task, and a generator object cannot be
        self._user_iterable = list(user_iterable)
        if not self._user_iterable:
            raise StreamletError("ArrayLooper: the iterable is empty; expected at least one element to loop over")
        self._sleep = sleep
        self._curiter: Iterator[Any] | None = None

    def setup(self, context: Context) -> None:
        self._curiter = itertools.cycle(self._user_iterable)

    def get(self) -> Any:
        if self._curiter is None:
            raise RuntimeError("ArrayLooper.get() called before setup()")
        if self._sleep is not None:
            time.sleep(self._sleep)
        return next(self._curiter)
