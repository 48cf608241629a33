"""The heronpy components of bench/multilang_bench.py: a sentence spout that notes when it
started, a native split bolt, and a count bolt that notes when it has every word."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from heron_py.api.bolt.bolt import Bolt
from heron_py.api.spout.spout import Spout

FIELDS = ["word", "sid", "pos"]
WORDS = ["the", "cow", "jumped", "over", "moon", "an", "apple", "a", "day", "keeps", "doctor", "away"]


def sentence(i: int) -> str:
    # tests/multilang/sentences.py's sentence i, which the multilang scripts import
    return " ".join(WORDS[(i * 7 + j * 3) % len(WORDS)] for j in range(1 + i % 6))


def total_words(n: int) -> int:
    return sum(1 + i % 6 for i in range(n))


class Sentences(Spout):
    outputs = ["sid", "sentence"]

    def initialize(self, config: dict[str, Any], context: Any) -> None:
        self.n, self.limit = 0, int(config["bench.sentences"])
        self.out = Path(config["bench.out"])

    def next_tuple(self) -> None:
        if self.n == 0:
            (self.out / "start").write_text(repr(time.time()))
        if self.n < self.limit:
            self.emit([self.n, sentence(self.n)])
            self.n += 1


class NativeSplit(Bolt):
    outputs = FIELDS

    def process(self, tup: Any) -> None:
        sid, text = tup.values
        for pos, word in enumerate(text.split(" ")):
            self.emit([word, sid, pos])


class Count(Bolt):
    def initialize(self, config: dict[str, Any], context: Any) -> None:
        self.words, self.want = 0, total_words(int(config["bench.sentences"]))
        self.out = Path(config["bench.out"])

    def process(self, tup: Any) -> None:
        self.words += 1
        if self.words == self.want:
            (self.out / "end").write_text(repr(time.time()))
