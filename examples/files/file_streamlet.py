"""The Streamlet API over a folder of growing files: each line's words, logged.

    mkdir -p /tmp/st-in && echo "the quick brown fox" >> /tmp/st-in/a.txt
    heron-py submit local examples/files/file_streamlet.py -- file_streamlet /tmp/st-in
    echo "jumps over the lazy dog" >> /tmp/st-in/b.txt      # new files are picked up
    heron-py logs local file_streamlet log-1
    heron-py kill local file_streamlet

Effectively once: the source keeps each file's (line, byte) position in its checkpointed state.
"""
import sys

from heron_py.api.streamlet.builder import Builder
from heron_py.api.streamlet.config import Config
from heron_py.api.streamlet.runner import Runner
from heron_py.connectors.files import FileTailGenerator

name = sys.argv[1] if len(sys.argv) > 1 else "file_streamlet"
folder = sys.argv[2] if len(sys.argv) > 2 else "/tmp/st-in"
builder = Builder()
builder.new_source(FileTailGenerator(folder, "*.txt")).set_name("lines").set_num_partitions(2) \
    .flat_map(lambda line: line.split()).log()
config = Config()
config.set_delivery_semantics(Config.EFFECTIVELY_ONCE)
Runner().run(name, config, builder)
