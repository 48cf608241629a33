"""Python classes a Flux file in this folder names by 'module.Class' (imported relative to it)."""

from __future__ import annotations

from typing import Any

from heronpy.api.bolt.bolt import Bolt
from heronpy.api.custom_grouping import ICustomGrouping
from heronpy.api.spout.spout import Spout
from heronpy.api.stream import Stream


class NumberSpout(Spout):
    outputs = ["n", Stream(["n"], name="direct", direct=True)]

    def next_tuple(self) -> None:
        self.emit([1])


class PrintBolt(Bolt):
    outputs = ["n"]

    def process(self, tup: Any) -> None:
        self.emit([tup.values[0]])


class FirstTask(ICustomGrouping):
    """Sends everything to the first ``width`` target tasks."""

    def __init__(self, width: int = 1) -> None:
        self.width = width
        self.targets: list[int] = []

    def prepare(self, context: Any, component: str, stream: str, target_tasks: list[int]) -> None:
        self.targets = sorted(target_tasks)

    def choose_tasks(self, values: Any) -> list[int]:
        return self.targets[: self.width]
