"""heronpy's Generator: a source that is asked for one element at a time."""

from __future__ import annotations

import logging
from abc import abstractmethod
from typing import Any

from heron_py.api.streamlet.context import Context


class Generator:
    """Subclass it, implement ``setup`` and ``get``, and pass an instance to
    ``Builder.new_source``. The instance is serialized at submit and set up in each task."""

    @property
    def logger(self) -> logging.Logger:
        # heronpy's TextFileGenerator logs through self.logger, which heronpy's Generator never
        # defined; a logger named after the class makes that code work
        return logging.getLogger(f"heron_py.streamlet.{type(self).__name__}")

    @abstractmethod
    def setup(self, context: Context) -> None:
        """Called once in the task before the first ``get``."""
        raise NotImplementedError(f"Generator {type(self).__name__} does not implement setup()")

    @abstractmethod
    def get(self) -> Any:
        """The next element, or None when there is nothing to emit right now."""
        raise NotImplementedError(f"Generator {type(self).__name__} does not implement get()")
