"""heron-py test addition: the template's WordSpout, stopping after ``wordcount.words`` words."""

from itertools import cycle, islice

from streamparse import Spout

WORDS = ["dog", "cat", "zebra", "elephant"]


def bounded_words(n):
    """The words the spout emits, in order (the test counts them with a plain Python Counter)."""
    return list(islice(cycle(WORDS), n))


class BoundedWordSpout(Spout):
    outputs = ["word"]

    def initialize(self, stormconf, context):
        self.words = iter(bounded_words(int(stormconf.get("wordcount.words", 4000))))

    def next_tuple(self):
        word = next(self.words, None)
        if word is not None:
            self.emit([word])
