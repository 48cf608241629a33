"""A Sink for ``Streamlet.to_sink``: heronpy's Python API had none; this is Heron's Java
Sink (setup / put / cleanup) with Python names."""

from __future__ import annotations

from abc import abstractmethod
from typing import Any

from heron_py.api.streamlet.context import Context


class Sink:
    @abstractmethod
    def setup(self, context: Context) -> None:
        """Called once in the task before the first ``put``."""
        raise NotImplementedError(f"Sink {type(self).__name__} does not implement setup()")

    @abstractmethod
    def put(self, element: Any) -> None:
        """Called with each element of the streamlet."""
        raise NotImplementedError(f"Sink {type(self).__name__} does not implement put()")

    def cleanup(self) -> None:
        """Called once when the task closes (a graceful stop)."""
