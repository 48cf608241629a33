"""A Streamlet KafkaSource is refused at submit, in the KafkaSpout's one line, when the Kafka
client is not installed. The missing module is simulated with a ``sys.modules`` entry set to
None (importlib then finds no such module): a fault that cannot be made for real where the
client is installed."""

from __future__ import annotations

import pickle
import sys

import pytest

from heron_py.api.streamlet.builder import Builder
from heron_py.api.topology import TopologyBuilder
from heron_py.connectors.kafka import KafkaSink, KafkaSource
from heron_py.planner.errors import TopologyError
from heron_py.planner.logical import validate
from heron_py.planner.model import TopologyDef
from heron_py.planner.requirements import pickled_globals

SERVERS = {"kafka.bootstrap.servers": "127.0.0.1:9"}


def _streamlet_topology(sink: bool) -> TopologyDef:
    builder = Builder()
    s = builder.new_source(KafkaSource({**SERVERS, "kafka.topics": ["in"]})).map(str.upper)
    if sink:
        s.to_sink(KafkaSink({**SERVERS, "kafka.topic": "out"}))
    else:
        s.log()
    tb = TopologyBuilder("streamlet_req")
    builder.build(tb)
    return tb.build()


def test_a_kafka_source_without_the_client_is_refused_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    topo = _streamlet_topology(sink=False)
    validate(topo)  # with the client importable (or not needed), the same topology passes
    monkeypatch.setitem(sys.modules, "confluent_kafka", None)
    with pytest.raises(TopologyError) as e:
        validate(topo)
    spout = next(c.name for c in topo.components if c.kind.value == "spout")
    assert str(e.value) == (f"topology 'streamlet_req': spout '{spout}' "
                            f"(heron_py.connectors.kafka.streamlet:KafkaSource) needs the Python module "
                            f"'confluent_kafka', which is not installed: pip install 'heron-py[kafka]'")


def test_a_kafka_sink_alone_is_refused_too(monkeypatch: pytest.MonkeyPatch) -> None:
    builder = Builder()
    builder.new_source(lambda: "x").to_sink(KafkaSink({**SERVERS, "kafka.topic": "out"}))
    tb = TopologyBuilder("sink_req")
    builder.build(tb)
    topo = tb.build()
    monkeypatch.setitem(sys.modules, "confluent_kafka", None)
    with pytest.raises(TopologyError) as e:
        validate(topo)
    assert "(heron_py.connectors.kafka.streamlet:KafkaSink) needs the Python module 'confluent_kafka'" in str(e.value)


def test_pickled_globals_reads_nested_pickles_without_loading_them() -> None:
    sink = KafkaSink({**SERVERS, "kafka.topic": "out"})
    for protocol in (2, 5):  # GLOBAL opcodes (protocol 2), STACK_GLOBAL with memoized strings (4+)
        outer = pickle.dumps({"packed": pickle.dumps([sink, sink], protocol=protocol)})
        assert ("heron_py.connectors.kafka.streamlet", "KafkaSink") in set(pickled_globals(outer))
    assert list(pickled_globals(b"\x80\x05not a pickle")) == []


@pytest.mark.parametrize(("module", "install", "kind"), [
    ("redis", "heron-py[redis]", "spout"),
    ("pika", "heron-py[rabbitmq]", "spout"),
    ("psycopg", "heron-py[postgres]", "bolt"),
])
def test_every_connector_without_its_client_is_refused_in_one_line(monkeypatch: pytest.MonkeyPatch, module: str,
                                                                    install: str, kind: str) -> None:
    """Not only Kafka's: each connector's client is checked at submit (the Redis, RabbitMQ and
    PostgreSQL classes declared theirs in an attribute nothing read)."""
    from heron_py.api.bolt.bolt import Bolt
    from heron_py.api.spout.spout import Spout
    from heron_py.api.stream import Grouping
    from heron_py.connectors.postgres import PostgresInsertBolt
    from heron_py.connectors.rabbitmq import RabbitMQSpout
    from heron_py.connectors.redis import RedisStreamSpout

    pg = {"postgres.url": "postgresql://h/db", "postgres.table": "t"}
    connector, conf = {"redis": (RedisStreamSpout, {"redis.stream": "s"}),
                       "pika": (RabbitMQSpout, {"rabbitmq.queue": "q"}),
                       "psycopg": (PostgresInsertBolt, pg)}[module]
    tb = TopologyBuilder("conn_req")
    if kind == "spout":
        src = tb.add_spout("src", connector, par=1, config=conf)
        tb.add_bolt("sink", Bolt, par=1, inputs={src: Grouping.SHUFFLE})
    else:
        src = tb.add_spout("src", Spout, par=1)
        tb.add_bolt("sink", connector, par=1, inputs={src: Grouping.SHUFFLE}, config=conf)
    topo = tb.build()
    monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(TopologyError) as e:
        validate(topo)
    name = "src" if kind == "spout" else "sink"
    used = next(c.class_name for c in topo.components if c.name == name)
    assert str(e.value) == (f"topology 'conn_req': {kind} '{name}' ({used}) needs the Python module '{module}', "
                            f"which is not installed: pip install '{install}'")
    assert used.startswith("heron_py.connectors.")
