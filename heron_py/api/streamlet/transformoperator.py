"""heronpy's TransformOperator: arbitrary per-element logic with a Context to emit through."""

from __future__ import annotations

from abc import abstractmethod
from typing import Any

from heron_py.api.streamlet.context import Context


class TransformOperator:
    @abstractmethod
    def setup(self, context: Context) -> None:
        """Called once in the task before the first ``transform``; keep ``context`` to emit."""
        raise NotImplementedError(f"TransformOperator {type(self).__name__} does not implement setup()")

    @abstractmethod
    def transform(self, tup: Any) -> None:
        """Called with each input Tuple (the element is ``tup.values[0]``, as heronpy);
        emit any number of elements with ``context.emit(element)``."""
        raise NotImplementedError(f"TransformOperator {type(self).__name__} does not implement transform()")
