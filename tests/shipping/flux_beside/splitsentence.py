"""Splits each sentence into words: Storm's flux-wrappers resources/splitsentence.py, with
the storm.py multilang adapter beside it (run by FluxShellBolt as ["python3", "splitsentence.py"])."""
# mypy: disable-error-code="no-untyped-call,misc"

from typing import Any

import storm


class SplitSentenceBolt(storm.BasicBolt):  # BasicBolt: anchored emits, acked after process
    def process(self, tup: Any) -> None:
        for word in tup.values[0].split(" "):
            storm.emit([word])


SplitSentenceBolt().run()
