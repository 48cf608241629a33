"""A sentence spout on Storm's storm.py (unchanged): emits (sid, sentence) with message id sid
for sid in 0..conf["test.sentences"]-1 and emits a sentence again when it fails."""

import storm
from sentences import sentence


class SentenceSpout(storm.Spout):
    def initialize(self, conf, context):
        self.limit = int(conf.get("test.sentences", 100))
        self.next_id = 0
        self.replay = []

    def nextTuple(self):
        if self.replay:
            sid = self.replay.pop()
        elif self.next_id < self.limit:
            sid = self.next_id
            self.next_id += 1
        else:
            return
        storm.emit([sid, sentence(sid)], id=sid)

    def fail(self, id):
        self.replay.append(id)


SentenceSpout().run()
