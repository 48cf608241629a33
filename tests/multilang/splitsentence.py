"""A split-sentence bolt on Storm's storm.py (unchanged): (sid, sentence) -> (word, sid, pos).

With conf "test.metrics" it also counts sentences in the engine's metric "sentences"."""

import storm


class SplitSentenceBolt(storm.BasicBolt):
    def initialize(self, conf, context):
        self.metrics = bool(conf.get("test.metrics"))
        storm.logInfo(f"split ready in task {context['taskid']}")

    def process(self, tup):
        if tup.stream == "__tick":
            storm.logDebug(f"tick {tup.values!r}")
            return
        sid, sentence = tup.values
        for pos, word in enumerate(sentence.split(" ")):
            storm.emit([word, sid, pos])
        if self.metrics:
            storm.rpcMetrics("sentences", 1)


SplitSentenceBolt().run()
