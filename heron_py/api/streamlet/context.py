"""heronpy's Context: what a Generator, TransformOperator or Sink knows about its task."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any


class Context(ABC):
    @abstractmethod
    def get_task_id(self) -> int:
        """The task id of this instance of the operator."""

    @abstractmethod
    def get_config(self) -> dict[str, Any]:
        """The topology config merged with the operator's."""

    @abstractmethod
    def get_stream_name(self) -> str:
        """The stream the operator reads (a source: the stream it writes)."""

    @abstractmethod
    def get_num_partitions(self) -> int:
        """How many tasks run this operator."""

    @abstractmethod
    def get_partition_index(self) -> int:
        """This task's index among them, 0 to get_num_partitions() - 1."""

    @abstractmethod
    def get_state(self) -> Any:
        """The operator's saved state (effectively once only; None otherwise)."""

    @abstractmethod
    def emit(self, values: Any) -> None:
        """Emits ``values`` (one element) on the operator's output stream."""
