"""Drops the words listed in stopwords.txt (in the working folder) and passes the others on."""
# mypy: disable-error-code="no-untyped-call,misc"

from typing import Any

import storm

with open("stopwords.txt", encoding="utf-8") as f:
    STOP = set(f.read().split())


class FilterBolt(storm.BasicBolt):
    def process(self, tup: Any) -> None:
        if tup.values[0] not in STOP:
            storm.emit([tup.values[0]])


FilterBolt().run()
