"""What spouts and bolts share: the runtime delegate and logging."""

from __future__ import annotations

import logging
from typing import Any, Protocol


class ComponentDelegate(Protocol):
    """The runtime's side of a spout or bolt (implemented by the instance process).

    ``emit`` takes every argument positionally, for both kinds: spouts pass ``anchors=None``,
    bolts pass ``tup_id=None``. It returns the destination task ids when ``need_task_ids``.
    """

    logger: logging.Logger

    def emit(self, tup: Any, stream: str, anchors: Any, direct_task: int | None,
             need_task_ids: bool, tup_id: Any) -> list[int] | None: ...

    def ack(self, tup: Any) -> None: ...

    def fail(self, tup: Any) -> None: ...

    def log(self, message: str, level: Any = None) -> None: ...


class BaseComponent:
    """heronpy's base of spouts and bolts. Do not override ``__init__``: use ``initialize``."""

    outputs: list[Any] = []

    def __init__(self, delegate: ComponentDelegate) -> None:
        self.delegate = delegate
        self._logger: logging.Logger | None = None

    @property
    def logger(self) -> logging.Logger:
        return self._logger if self._logger is not None else self.delegate.logger

    @logger.setter
    def logger(self, value: logging.Logger) -> None:
        # heronpy made ``logger`` a plain attribute, and some components replace it
        self._logger = value

    def log(self, message: str, level: Any = None) -> None:
        """``level``: "trace" (= debug), "debug", "info" (default), "warn" or "error", as heronpy."""
        self.delegate.log(message, level)
