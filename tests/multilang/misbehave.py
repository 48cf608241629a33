"""A split-sentence bolt (storm.py) that misbehaves once, at its 3rd sentence, as
conf["test.misbehave"] says: "nonjson" writes a line that is not JSON, "oversize" a message
over the engine's size limit, "silent" stops reading and answering (heartbeats too). The
first incarnation to get there creates a marker file in conf["test.marker.dir"]; later
ones (the restarted task) behave."""

import os
import sys
import time

import storm


class MisbehavingSplitBolt(storm.BasicBolt):
    def initialize(self, conf, context):
        self.mode = conf["test.misbehave"]
        self.marker = os.path.join(conf["test.marker.dir"], "misbehaved-" + self.mode)
        self.seen = 0

    def process(self, tup):
        self.seen += 1
        if self.seen == 3 and self._first():
            sys.stderr.write(f"about to misbehave: {self.mode}\n")
            sys.stderr.flush()
            if self.mode == "nonjson":
                print("this line is not JSON")
                sys.stdout.flush()
            elif self.mode == "oversize":
                storm.logInfo("x" * 200000)
            time.sleep(3600)
        sid, sentence = tup.values
        for pos, word in enumerate(sentence.split(" ")):
            storm.emit([word, sid, pos])

    def _first(self):
        try:
            os.close(os.open(self.marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            return True
        except FileExistsError:
            return False


MisbehavingSplitBolt().run()
