"""The KafkaBolt's mapping of input fields to a record (Storm's FieldNameBasedTupleToKafkaMapper
and kafka.topic.field), on a real Kafka-protocol broker (Tansu), read back with the real
client: per input stream the topic, key and message fields are found by name, a field the
stream lacks is a null key or value, an empty topic field falls back to kafka.topic, and an
input with no topic at all is written nowhere and named in one line (the run is at most once:
its fail is not observed here)."""

import logging

import pytest

from heron_py.api.spout.spout import Spout
from heron_py.api.stream import Grouping
from heron_py.api.topology import TopologyBuilder
from heron_py.connectors.kafka import KafkaBolt
from heron_py.testing.inprocess import run_in_process
from tests.kafka_broker import OutputReader, broker_or_skip
from tests.support import wait_for

pytestmark = pytest.mark.integration


class ListSpout(Spout):
    """Emits its config's rows once, each on its own."""

    def initialize(self, config, context):
        self.rows = list(config["test.rows"])

    def next_tuple(self):
        if self.rows:
            self.emit(self.rows.pop(0))


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = broker_or_skip(tmp_path_factory.mktemp("tansu"))
    yield b
    b.stop()


def read(bootstrap: str, topic: str, n: int) -> set[tuple[bytes | None, bytes | None]]:
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"fields-{topic}", "enable.auto.commit": False})
    parts = c.list_topics(topic, timeout=10).topics[topic].partitions
    c.assign([TopicPartition(topic, p, 0) for p in parts])
    got: list[tuple[bytes | None, bytes | None]] = []
    wait_for(lambda: got.extend((m.key(), m.value()) for m in c.consume(100, 0.2) if m.error() is None)
             or len(got) >= n, timeout=30, what=f"{n} records in {topic}")
    c.close()
    assert len(got) == n, got
    return set(got)


def test_each_stream_maps_its_own_fields_and_an_input_without_a_topic_is_refused(broker, caplog):
    for t in ("kf-named", "kf-default", "kf-strict"):
        broker.create_topic(t, 1)
    OutputReader(broker.bootstrap, "kf-default").poll()  # the topics' metadata known before the writes
    b = TopologyBuilder("kafka_bolt_fields")
    full = b.add_spout("full", ListSpout, par=1, optional_outputs=["message", "key", "topic"],
                       config={"test.rows": [["v1", "k1", "kf-named"], ["v2", "k2", ""]]})
    bare = b.add_spout("bare", ListSpout, par=1, optional_outputs=["message"], config={"test.rows": [["v3"]]})
    key_first = b.add_spout("key_first", ListSpout, par=1, optional_outputs=["key", "message"],
                            config={"test.rows": [["k4", "v4"]]})
    topic_first = b.add_spout("topic_first", ListSpout, par=1, optional_outputs=["topic", "message"],
                              config={"test.rows": [["kf-named", "v5"]]})
    common = {"kafka.bootstrap.servers": broker.bootstrap, "kafka.topic.field": "topic",
              "kafka.producer.linger.ms": 0}
    b.add_bolt("out", KafkaBolt, par=1, inputs={s: Grouping.SHUFFLE for s in (full, bare, key_first, topic_first)},
               config={**common, "kafka.topic": "kf-default"})
    # no kafka.topic: an input whose topic field is empty (or absent) has nowhere to go
    b.add_bolt("strict", KafkaBolt, par=1, inputs={full: Grouping.SHUFFLE}, config=common)
    with caplog.at_level(logging.WARNING):
        run_in_process(b, settle_timeout_s=30)
    # "full" holds its fields in another order than Storm's default names suggest: found by name
    assert read(broker.bootstrap, "kf-named", 3) == {(b"k1", b"v1"), (None, b"v5")}  # k1 from both bolts
    # an empty topic field: kafka.topic; a stream without the key field: a null key
    assert read(broker.bootstrap, "kf-default", 3) == {(b"k2", b"v2"), (None, b"v3"), (b"k4", b"v4")}
    lines = [r.getMessage() for r in caplog.records if "has no topic" in r.getMessage()]
    assert len(lines) == 1, lines
    assert lines[0].endswith("input from 'full' has no topic in field 'topic'; failing it")
