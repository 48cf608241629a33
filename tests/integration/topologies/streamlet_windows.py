"""Streamlet windowed reduces on real processes: heronpy's word-count streamlet
(reduce_by_key_and_window over a 4 s window sliding every 2 s) and a reduce_by_window."""

import sys

from heronpy.connectors.mock.arraylooper import ArrayLooper
from heronpy.streamlet.builder import Builder
from heronpy.streamlet.config import Config
from heronpy.streamlet.runner import Runner
from heronpy.streamlet.windowconfig import WindowConfig

if __name__ == "__main__":
    builder = Builder()
    pairs = builder.new_source(ArrayLooper(["Mary Had a little lamb", "I Love You"], sleep=0.01)) \
        .flat_map(lambda line: line.split()) \
        .map(lambda word: (word, 1))
    pairs.reduce_by_key_and_window(WindowConfig.create_sliding_window(4, 2), lambda x, y: x + y) \
        .set_num_partitions(2).set_name("counts").log()
    pairs.map(lambda kv: kv[1]) \
        .reduce_by_window(WindowConfig.create_tumbling_window(2), lambda x, y: x + y).set_name("total").log()
    Runner().run(sys.argv[1] if len(sys.argv) > 1 else "streamlet_windows", Config(), builder)
