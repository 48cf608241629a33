from streamparse import Spout


class FileWordSpout(Spout):
    """Emits each word of resources/words.txt once (a path relative to the working folder)."""

    outputs = ["word"]

    def initialize(self, stormconf, context):
        with open("resources/words.txt", encoding="utf-8") as f:
            self.words = iter(f.read().split())

    def next_tuple(self):
        word = next(self.words, None)
        if word is not None:
            self.emit([word])
