"""Under EFFECTIVELY_ONCE a sink that writes inputs as they come would write a replay twice:
refused at submit with one line, unless the operator accepts it; heron-py's exact sinks pass."""

from __future__ import annotations

import pytest

from heron_py.api.spout.spout import Spout
from heron_py.api.stream import Grouping
from heron_py.api.streamlet.builder import Builder
from heron_py.api.streamlet.config import Config
from heron_py.api.topology import TopologyBuilder
from heron_py.planner.errors import TopologyError
from heron_py.planner.logical import validate


class Lines(Spout):
    outputs = ["line"]

    def next_tuple(self) -> None:
        pass


def _topology(sink: type, mode: str, **conf: object) -> object:
    b = TopologyBuilder("eo")
    s = b.add_spout("lines", Lines, par=1)
    b.add_bolt("sink", sink, par=1, inputs={s: Grouping.SHUFFLE}, config=dict(conf))
    b.set_config({"topology.reliability.mode": mode})
    return b.build()


def test_a_sink_that_writes_as_inputs_come_is_refused_under_effectively_once() -> None:
    pytest.importorskip("pika")
    from heron_py.connectors.rabbitmq import RabbitMQBolt

    with pytest.raises(TopologyError) as e:
        validate(_topology(RabbitMQBolt, "EFFECTIVELY_ONCE"))  # type: ignore[arg-type]
    assert str(e.value) == (
        "topology 'eo': bolt 'sink' (heron_py.connectors.rabbitmq.bolt:RabbitMQBolt) does not write exactly once "
        "under EFFECTIVELY_ONCE (a publish to RabbitMQ cannot be taken back or deduplicated): a replay after a "
        "failure writes again what it wrote; expected a sink that commits with the checkpoints (PostgresInsertBolt, "
        "RedisStreamBolt, RedisStoreBolt, FileSink), or topology.reliability.mode ATLEAST_ONCE with consumers that "
        "drop duplicates, or heron_py.sink.at.least.once.ok: true to accept duplicates in that sink's system")
    validate(_topology(RabbitMQBolt, "ATLEAST_ONCE"))  # type: ignore[arg-type]
    validate(_topology(RabbitMQBolt, "EFFECTIVELY_ONCE",  # type: ignore[arg-type]
                       **{"heron_py.sink.at.least.once.ok": True}))


def test_the_exact_sinks_pass() -> None:
    pytest.importorskip("psycopg")
    from heron_py.connectors.postgres import PostgresInsertBolt

    validate(_topology(PostgresInsertBolt, "EFFECTIVELY_ONCE"))  # type: ignore[arg-type]


def test_a_streamlet_sink_is_found_in_its_pickled_config() -> None:
    pytest.importorskip("redis")
    from heron_py.api.streamlet.runner import build_topology
    from heron_py.connectors.redis import RedisStreamSink

    builder = Builder()
    builder.new_source(lambda: "x").set_name("src").to_sink(RedisStreamSink("redis://127.0.0.1:1/0", "out"))
    config = Config()
    config.set_delivery_semantics(Config.EFFECTIVELY_ONCE)
    with pytest.raises(TopologyError) as e:
        validate(build_topology("eo", config, builder))
    assert "(heron_py.connectors.redis.streamlet:RedisStreamSink) does not write exactly once" in str(e.value)
