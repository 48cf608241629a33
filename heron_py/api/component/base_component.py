"""What spouts and bolts share: the runtime delegate, logging, and ``spec``."""

from __future__ import annotations

import logging
from typing import Any, Protocol


class ComponentDelegate(Protocol):
    """The runtime's side (implemented by the instance process)."""

    logger: logging.Logger

    def emit(self, tup: Any, stream: str, anchors: Any, direct_task: int | None,
             need_task_ids: bool, tup_id: Any) -> list[int] | None: ...

    def ack(self, tup: Any) -> None: ...

    def fail(self, tup: Any) -> None: ...

    def log(self, message: str, level: Any = None) -> None: ...


class BaseComponent:
    outputs: list[Any] = []

    def __init__(self, delegate: ComponentDelegate) -> None:
        self.delegate = delegate

    @property
    def logger(self) -> logging.Logger:
        return self.delegate.logger

    def log(self, message: str, level: Any = None) -> None:
        self.delegate.log(message, level)
