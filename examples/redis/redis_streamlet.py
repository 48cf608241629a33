"""The Streamlet API with Redis: lines from a stream, split into words, written to another stream.

    redis-server --port 6379 --appendonly yes &
    for i in $(seq 100); do redis-cli XADD lines '*' value "the quick brown fox $i"; done
    heron-py submit local examples/redis/redis_streamlet.py -- redis_streamlet redis://127.0.0.1:6379/0
    redis-cli XLEN words
    heron-py kill local redis_streamlet

Effectively once: the source keeps the id it read up to in its checkpointed state, so after a
failure it reads again from the last checkpoint's id. The Redis stream sink XADDs elements as
they come, so it may write an element again after a restore: heron-py refuses such a sink under
effectively once unless heron_py.sink.at.least.once.ok says the duplicates are fine (here the
consumer of "words" de-duplicates); docs/effectively-once.md lists the sinks that are exact.
"""
import sys

from heron_py.api.streamlet.builder import Builder
from heron_py.api.streamlet.config import Config
from heron_py.api.streamlet.runner import Runner
from heron_py.connectors.redis import RedisStreamGenerator, RedisStreamSink

name = sys.argv[1] if len(sys.argv) > 1 else "redis_streamlet"
url = sys.argv[2] if len(sys.argv) > 2 else "redis://127.0.0.1:6379/0"
builder = Builder()
builder.new_source(RedisStreamGenerator(url, ["lines"])).set_name("lines") \
    .flat_map(lambda line: line.split()).to_sink(RedisStreamSink(url, "words"))
config = Config()
config.set_delivery_semantics(Config.EFFECTIVELY_ONCE)
config.set_user_config("heron_py.sink.at.least.once.ok", True)
Runner().run(name, config, builder)
