"""User-defined groupings, as heronpy's ICustomGrouping."""

from __future__ import annotations

import abc
from typing import Any


class ICustomGrouping(abc.ABC):
    def prepare(self, context: Any, component: str, stream: str, target_tasks: list[int]) -> None:
        """Called once in each emitting task before the first choose_tasks."""

    @abc.abstractmethod
    def choose_tasks(self, values: Any) -> list[int]:
        """Returns the task ids (from target_tasks) that receive a tuple with these values."""
