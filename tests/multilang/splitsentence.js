// A split-sentence bolt on Storm's storm.js (unchanged): (sid, sentence) -> (word, sid, pos).
var storm = require('./storm');
var BasicBolt = storm.BasicBolt;

function SplitSentenceBolt() {
    BasicBolt.call(this);
}

SplitSentenceBolt.prototype = Object.create(BasicBolt.prototype);
SplitSentenceBolt.prototype.constructor = SplitSentenceBolt;

SplitSentenceBolt.prototype.process = function(tup, done) {
    var self = this;
    if (tup.stream === '__tick') {  // a tick has no sentence (storm.js hands ticks to process)
        done();
        return;
    }
    var sid = tup.values[0];
    tup.values[1].split(' ').forEach(function(word, pos) {
        self.emit({tuple: [word, sid, pos], anchorTupleId: tup.id}, function(taskIds) {});
    });
    done();
};

new SplitSentenceBolt().run();
