"""Emits random sentences, one per nextTuple (a Python take on Storm's resources/randomsentence.js,
which needs Node): run by FluxShellSpout as ["python3", "sentences.py"]."""
# mypy: disable-error-code="no-untyped-call,misc"

import random
import time

import storm

SENTENCES = (
    "the cow jumped over the moon",
    "an apple a day keeps the doctor away",
    "four score and seven years ago",
    "snow white and the seven dwarfs",
    "i am at two with nature",
)


class RandomSentenceSpout(storm.Spout):
    def nextTuple(self) -> None:
        time.sleep(0.1)  # as Storm's random sentence spouts pace themselves
        storm.emit([random.choice(SENTENCES)])


RandomSentenceSpout().run()
