"""The Kafka connectors' pure parts: options, errors verbatim, assignment, first-poll starts,
translators, and the submit-time refusal when the client is not installed."""

import pytest

from heron_py.api.bolt.bolt import Bolt
from heron_py.api.spout.spout import Spout
from heron_py.api.stream import Grouping
from heron_py.api.topology import TopologyBuilder
from heron_py.connectors.base import ConnectorConfigError
from heron_py.connectors.kafka.config import FirstPollOffsetStrategy as FP
from heron_py.connectors.kafka.config import ProcessingGuarantee, bolt_config, spout_config
from heron_py.connectors.kafka.spout import round_robin, start_offset
from heron_py.connectors.kafka.translators import deserializer, serializer, translator
from heron_py.planner import requirements
from heron_py.planner.errors import TopologyError
from heron_py.planner.logical import validate

W = "kafka spout 'k'"


class ReqSpout(Spout):
    outputs = ["x"]


class ReqBolt(Bolt):
    pass


def test_spout_defaults_are_storms():
    c = spout_config({"kafka.bootstrap.servers": "h:9092", "kafka.topics": ["a", "b"]}, W, "grp")
    assert c.first_poll is FP.UNCOMMITTED_EARLIEST and c.guarantee is ProcessingGuarantee.AT_LEAST_ONCE
    assert c.max_uncommitted == 10_000_000 and c.retry.max_retries == -1 and c.commit_period_s == 30.0
    assert c.group_id == "grp" and c.topics == ("a", "b")
    cc = c.client_config()
    assert cc["enable.auto.commit"] is False and cc["bootstrap.servers"] == "h:9092"


def test_consumer_options_pass_through():
    c = spout_config({"kafka.bootstrap.servers": "h:1", "kafka.topics": "a",
                      "kafka.consumer.fetch.min.bytes": 10}, W, "g")
    assert c.client_config()["fetch.min.bytes"] == 10


def test_the_fetch_queue_backoff_is_short_unless_set():
    """librdkafka's 1000 ms default held the spout to ~120,000 records/s (bench/kafka_bench.py)."""
    base = {"kafka.bootstrap.servers": "h:1", "kafka.topics": "a"}
    assert spout_config(base, W, "g").client_config()["fetch.queue.backoff.ms"] == 10
    own = spout_config({**base, "kafka.consumer.fetch.queue.backoff.ms": 500}, W, "g")
    assert own.client_config()["fetch.queue.backoff.ms"] == 500


@pytest.mark.parametrize("conf, line", [
    ({"kafka.topics": ["a"]}, "kafka spout 'k': config kafka.bootstrap.servers: expected "
                              "'host:port[,host:port...]', found None"),
    ({"kafka.bootstrap.servers": "h:1"}, "kafka spout 'k': config kafka.topics / kafka.topic.pattern: expected "
                                         "exactly one of them, found {'kafka.topics': None, "
                                         "'kafka.topic.pattern': None}"),
    ({"kafka.bootstrap.servers": "h:1", "kafka.topics": ["a"], "kafka.first.poll.offset.strategy": "OLDEST"},
     "kafka spout 'k': config kafka.first.poll.offset.strategy: expected one of ['EARLIEST', 'LATEST', "
     "'UNCOMMITTED_EARLIEST', 'UNCOMMITTED_LATEST'], found 'OLDEST'"),
    ({"kafka.bootstrap.servers": "h:1", "kafka.topics": ["a"], "kafka.max.retries": "x"},
     "kafka spout 'k': config kafka.max.retries: expected an integer >= -1, found 'x'"),
    ({"kafka.bootstrap.servers": "h:1", "kafka.topics": ["a"], "kafka.ack.per.record": "maybe"},
     "kafka spout 'k': config kafka.ack.per.record: expected true or false, found 'maybe'"),
])
def test_spout_config_errors_verbatim(conf, line):
    with pytest.raises(ConnectorConfigError) as e:
        spout_config(conf, W, "g")
    assert str(e.value) == line


def test_unknown_deserializer_and_translator_verbatim():
    with pytest.raises(ConnectorConfigError) as e:
        deserializer(W, "kafka.value.deserializer", "avro")
    assert str(e.value) == ("kafka spout 'k': config kafka.value.deserializer: unknown value 'avro'; expected one of "
                            "['string', 'bytes', 'json', 'org.apache.kafka.common.serialization.StringDeserializer', "
                            "'org.apache.kafka.common.serialization.ByteArrayDeserializer'] or 'module.Class'")
    with pytest.raises(ConnectorConfigError) as e:
        translator(W, "nosuch.Translator", ("a",))
    assert str(e.value) == ("kafka spout 'k': config kafka.record.translator: class 'nosuch.Translator' cannot be "
                            "imported (ModuleNotFoundError: No module named 'nosuch'); expected one of "
                            "['default', 'value', 'by_topic'] or 'module.Class'")


def test_deserializers_and_java_names():
    assert deserializer(W, "k", "org.apache.kafka.common.serialization.StringDeserializer")("t", b"h\xc3\xa9") == "hé"
    assert deserializer(W, "k", "org.apache.kafka.common.serialization.ByteArrayDeserializer")("t", b"x") == b"x"
    assert deserializer(W, "k", "json")("t", b'{"a": 1}') == {"a": 1}
    assert deserializer(W, "k", "string")("t", None) is None


def test_the_string_serializer_encodes_each_kind_of_field():
    ser = serializer(W, "k", "org.apache.kafka.common.serialization.StringSerializer")

    class Name(str):
        def __str__(self) -> str:
            return "named"

    assert ser("hé") == "hé".encode()
    assert ser(b"\x00raw") == b"\x00raw"  # bytes pass as they are
    assert ser(None) is None  # a null key or value
    assert ser(42) == b"42"
    assert ser(Name("x")) == b"named"  # a str subclass goes through its str(), as before


def test_translators():
    assert translator(W, "default", ()).translate("t", 1, 5, "k", "v") == ("default", ["t", 1, 5, "k", "v"])
    assert translator(W, "value", ()).streams() == {"default": ("value",)}
    by = translator(W, "by_topic", ("a", "b"))
    assert set(by.streams()) == {"a", "b"} and by.translate("b", 0, 1, None, "v")[0] == "b"


def test_round_robin_over_the_sorted_partition_list():
    parts = [("b", 0), ("a", 1), ("a", 0), ("b", 1), ("a", 2)]
    assert round_robin(parts, 0, 2) == [("a", 0), ("a", 2), ("b", 1)]
    assert round_robin(parts, 1, 2) == [("a", 1), ("b", 0)]
    every = sorted(round_robin(parts, 0, 3) + round_robin(parts, 1, 3) + round_robin(parts, 2, 3))
    assert every == sorted(parts)


def test_first_poll_strategies():
    assert start_offset(FP.UNCOMMITTED_EARLIEST, 7, ours=False) == 7
    assert start_offset(FP.UNCOMMITTED_EARLIEST, None, ours=False) == "earliest"
    assert start_offset(FP.UNCOMMITTED_LATEST, None, ours=False) == "latest"
    assert start_offset(FP.EARLIEST, 7, ours=False) == "earliest"  # an earlier deployment's commit: ignored
    assert start_offset(FP.EARLIEST, 7, ours=True) == 7  # a restarted task of this topology resumes
    assert start_offset(FP.LATEST, 7, ours=False) == "latest"


def test_bolt_defaults_and_error():
    c = bolt_config({"kafka.bootstrap.servers": "h:1", "kafka.topic": "out"}, "kafka bolt 'b'")
    assert (c.key_field, c.message_field, c.fire_and_forget) == ("key", "message", False)
    assert c.client_config()["enable.idempotence"] is True
    with pytest.raises(ConnectorConfigError) as e:
        bolt_config({"kafka.bootstrap.servers": "h:1", "kafka.topic": "out", "kafka.fire.and.forget": "maybe"},
                    "kafka bolt 'b'")
    assert str(e.value) == "kafka bolt 'b': config kafka.fire.and.forget: expected true or false, found 'maybe'"


def test_a_topology_needing_a_missing_module_is_refused_in_one_line():
    requirements._BY_PREFIX[__name__ + "."] = requirements.Requirement("heron_py_no_such_module_xyz",
                                                                        "heron-py[nothing]")
    try:
        b = TopologyBuilder("req")
        s = b.add_spout("s", ReqSpout, par=1)
        b.add_bolt("b", ReqBolt, par=1, inputs={s: Grouping.SHUFFLE})
        with pytest.raises(TopologyError) as e:
            validate(b.build())
        assert str(e.value) == (f"topology 'req': spout 's' ({__name__}:ReqSpout) needs the Python module "
                                f"'heron_py_no_such_module_xyz', which is not installed: "
                                f"pip install 'heron-py[nothing]'")
    finally:
        requirements._BY_PREFIX.pop(__name__ + ".")


def test_checkpointed_positions_round_trip_and_commit_the_newest_complete():
    from heron_py.connectors.kafka.spout import newest_complete, positions_from_state, positions_to_state

    pos = {("b", 1): 7, ("a", 0): 3}
    assert positions_to_state(pos) == {("a", 0): 3, ("b", 1): 7}  # a mapping: a rescale merges it
    assert positions_from_state(positions_to_state(pos)) == pos and positions_from_state(None) == {}
    assert positions_from_state([["a", 0, 3], ["b", 1, 7]]) == pos  # what a checkpoint of before holds
    saved = {4: {("a", 0): 1}, 5: {("a", 0): 2}, 7: {("a", 0): 3}}
    # the master's word for 6: 7 is saved but not complete yet, its positions could still be rolled back
    assert newest_complete(saved, 6) == 5
    assert newest_complete(saved, 5) == 5
    assert newest_complete(saved, 3) is None


def test_streamlet_source_and_sink_refuse_what_they_cannot_do():
    from heron_py.connectors.kafka import KafkaSink, KafkaSource

    base = {"kafka.bootstrap.servers": "h:1", "kafka.topics": ["a"]}
    with pytest.raises(ConnectorConfigError) as e:
        KafkaSource({**base, "kafka.processing.guarantee": "AT_LEAST_ONCE"})
    assert str(e.value) == ("kafka source: config kafka.processing.guarantee: expected NO_GUARANTEE or AT_MOST_ONCE "
                            "(a Streamlet source has no acking; use the KafkaSpout, or EFFECTIVELY_ONCE mode), found "
                            "'AT_LEAST_ONCE'")
    with pytest.raises(ConnectorConfigError) as e:
        KafkaSource({**base, "kafka.record.translator": "no_such"})
    assert str(e.value) == ("kafka source: config kafka.record.translator: unknown value 'no_such'; expected one of "
                            "['default', 'value', 'by_topic'] or 'module.Class'")
    with pytest.raises(ConnectorConfigError) as e:
        KafkaSink({"kafka.bootstrap.servers": "h:1", "kafka.topic.field": "t"})
    assert str(e.value) == ("kafka sink: config kafka.topic: expected a topic name (a sink's element has no fields "
                            "for kafka.topic.field), found 't'")
    assert KafkaSource(base).config["kafka.record.translator"] == "value"  # elements are the values
