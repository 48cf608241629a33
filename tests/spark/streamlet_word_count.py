"""A Streamlet word count over a text file (tests/spark/test_streamlet_batch.py runs it
streaming and with `heron-py batch`): lines -> words -> (word, 1) -> a tumbling window's sums
per word -> (word, count) pairs, named "pairs".

With fusion (on by default) the source's spout runs the flat_map and map, one component named
"lines__flatmap-1__map-1": a batch run's input feeds that component, and goes through both.

    heron-py submit local streamlet_word_count.py NAME FILE
    heron-py batch --input lines__flatmap-1__map-1=FILE --output pairs:output=out.jsonl \
        streamlet_word_count.py NAME FILE
"""

import sys

from heronpy.connectors.textfiles.textfilesgenerator import TextFileGenerator
from heronpy.streamlet.builder import Builder
from heronpy.streamlet.config import Config
from heronpy.streamlet.runner import Runner
from heronpy.streamlet.windowconfig import WindowConfig

name, path = sys.argv[1], sys.argv[2]
builder = Builder()
lines = builder.new_source(TextFileGenerator(path)).set_name("lines")
# one window holds the whole bounded input: it is read in well under the window's 8 s
counts = lines.flat_map(lambda line: line.split()) \
    .map(lambda word: (word, 1)) \
    .reduce_by_key_and_window(WindowConfig.create_tumbling_window(8), lambda x, y: x + y)
# nothing reads "pairs": a log() behind it would run in its task (fusion), and the batch run
# writes what "pairs" emits, which a component of its own declares
counts.map(lambda kv: (kv[0].get_key(), kv[1])).set_name("pairs")
Runner().run(name, Config(), builder)
