"""A split-sentence bolt on pystorm, speaking msgpack (pystorm's MsgpackSerializer)."""

import pystorm


class SplitSentenceBolt(pystorm.Bolt):
    def process(self, tup):
        sid, sentence = tup.values
        for pos, word in enumerate(sentence.split(" ")):
            self.emit([word, sid, pos])


SplitSentenceBolt(serializer="msgpack").run()
