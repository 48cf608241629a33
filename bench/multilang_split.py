"""The split bolt of bench/multilang_bench.py as a pystorm component (run natively in the
instance, or as ``python -m streamparse.run multilang_split.PystormSplit`` subprocess)."""

import pystorm


class PystormSplit(pystorm.Bolt):
    def process(self, tup):
        sid, sentence = tup.values
        for pos, word in enumerate(sentence.split(" ")):
            self.emit([word, sid, pos])
