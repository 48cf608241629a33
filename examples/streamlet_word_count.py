"""Heron's Streamlet API: a sliding-window word count, logged by the log() sink.

    heron-py submit local examples/streamlet_word_count.py streamlet_wc   # the argument names the topology
    heron-py logs local streamlet_wc log-1      # the log() sink: "(KeyedWindow {key: lamb, ...}, 64665)"
    heron-py kill local streamlet_wc
"""
import sys

from heronpy.connectors.mock.arraylooper import ArrayLooper
from heronpy.streamlet.builder import Builder
from heronpy.streamlet.config import Config
from heronpy.streamlet.runner import Runner
from heronpy.streamlet.windowconfig import WindowConfig

builder = Builder()
builder.new_source(ArrayLooper(["Mary had a little lamb", "I love you"])) \
    .flat_map(lambda line: line.split()).map(lambda w: (w, 1)) \
    .reduce_by_key_and_window(WindowConfig.create_sliding_window(10, 2), lambda x, y: x + y).log()
Runner().run(sys.argv[1] if len(sys.argv) > 1 else "streamlet_wc", Config(), builder)
