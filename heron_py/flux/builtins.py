"""Python versions of the Java classes Storm's own Flux examples use, with Storm's behaviour.

They are what a Flux ``className`` of org.apache.storm.testing.TestWordSpout,
org.apache.storm.testing.TestWordCounter or org.apache.storm.flux.wrappers.bolts.LogInfoBolt
turns into (see heron_py.flux.classes). They live in heron_py, which every container
imports, so they are pickled by reference like any other installed class.
"""

from __future__ import annotations

import logging
import random
import time
from typing import Any

from heron_py.api.bolt.bolt import Bolt
from heron_py.api.spout.spout import Spout

# Storm's fixed word list (org.apache.storm.testing.TestWordSpout)
WORDS = ("nathan", "mike", "jackson", "golda", "bertels")


class TestWordSpout(Spout):
    """Emits one random word of ``WORDS`` on field "word" every 100 ms, as Storm's: its
    nextTuple sleeps 100 ms first. No message id, so nothing is tracked (Storm's neither)."""

    __test__ = False  # pytest: not a test class despite the name
    outputs = ["word"]
    SLEEP_S = 0.1

    def initialize(self, config: dict[str, Any], context: Any) -> None:
        self._rand = random.Random()

    def next_tuple(self) -> None:
        time.sleep(self.SLEEP_S)
        self.emit([self._rand.choice(WORDS)])


class TestWordCounter(Bolt):
    """Counts the words in field 0 of each input and emits (word, count) with the running
    count, as Storm's (a BaseBasicBolt: emits anchored to the input, input acked after)."""

    __test__ = False
    outputs = ["word", "count"]
    auto_anchor = True
    auto_ack = True

    def initialize(self, config: dict[str, Any], context: Any) -> None:
        self._counts: dict[str, int] = {}

    def process(self, tup: Any) -> None:
        word = tup.values[0]
        count = self._counts.get(word, 0) + 1
        self._counts[word] = count
        self.emit([word, count])


def storm_tuple_text(tup: Any) -> str:
    """A tuple as Storm's TupleImpl.toString prints it (what LogInfoBolt logs in Storm)."""
    values = ", ".join(str(v) for v in tup.values)
    return f"source: {tup.component}:{tup.task}, stream: {tup.stream}, id: {{}}, [{values}]"


class LogInfoBolt(Bolt):
    """Logs each tuple at INFO and emits nothing (Storm's flux-wrappers LogInfoBolt)."""

    outputs: list[Any] = []
    auto_ack = True

    def initialize(self, config: dict[str, Any], context: Any) -> None:
        self._log = logging.getLogger("org.apache.storm.flux.wrappers.bolts.LogInfoBolt")

    def process(self, tup: Any) -> None:
        self._log.info("%s", storm_tuple_text(tup))
