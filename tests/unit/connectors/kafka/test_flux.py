"""storm-kafka-client's classes in Flux files: Storm's own flux-examples kafka_spout.yaml
(copied unchanged into tests/flux/kafka_spout_storm.yaml from apache/storm
flux/flux-examples/src/main/resources/kafka_spout.yaml, Apache-2.0) and ours load with the
options mapped; what cannot be mapped is one error line."""

from pathlib import Path

import pytest

from heron_py.common.config_codec import restore_config
from heron_py.connectors.kafka.translators import RecordTranslator, ValueRecordTranslator, translator
from heron_py.flux.errors import FluxError
from heron_py.flux.loader import load_flux

FLUX = Path(__file__).resolve().parents[3] / "flux"


def _config(topology, name):
    return restore_config(topology.component(name).config)  # as the task reads it


def load_text(tmp_path, text):
    p = tmp_path / "k.yaml"
    p.write_text(text)
    return load_flux(p, filter_file=None, env={})


def test_storms_kafka_spout_example_loads_unchanged():
    t = load_flux(FLUX / "kafka_spout_storm.yaml", filter_file=None, env={})
    spout = t.component("kafka-spout")
    assert [(s.name, tuple(s.fields)) for s in spout.outputs] == [("default", ("value",))]
    conf = _config(t, "kafka-spout")
    assert conf["kafka.bootstrap.servers"] == "localhost:9092" and conf["kafka.topics"] == ["myKafkaTopic"]
    assert conf["kafka.first.poll.offset.strategy"] == "EARLIEST"
    assert isinstance(conf["kafka.record.translator"], ValueRecordTranslator)
    assert conf["kafka.value.deserializer"] == "org.apache.kafka.common.serialization.StringDeserializer"
    assert b"KafkaSpout" in spout.class_ref.data


def test_our_kafka_to_kafka_file_maps_storms_properties():
    t = load_flux(FLUX / "kafka_to_kafka.yaml", filter_file=None, env={"KAFKA_BOOTSTRAP": "h:1"})
    spout = _config(t, "kafka-spout")
    bolt = {k: v for k, v in _config(t, "kafka-bolt").items() if k.startswith("kafka.")}
    assert spout["kafka.group.id"] == "flux-group" and spout["kafka.processing.guarantee"] == "AT_LEAST_ONCE"
    assert bolt == {"kafka.bootstrap.servers": "h:1", "kafka.producer.acks": "all", "kafka.topic": "flux-out",
                    "kafka.key.serializer": "org.apache.kafka.common.serialization.StringSerializer",
                    "kafka.value.serializer": "org.apache.kafka.common.serialization.StringSerializer",
                    "kafka.key.field": "key", "kafka.message.field": "value"}
    assert t.config["topology.reliability.mode"] == "ATLEAST_ONCE"


BUILDER = """name: t
components:
  - id: b
    className: "org.apache.storm.kafka.spout.KafkaSpoutConfig$Builder"
    constructorArgs: ["h:1", ["a", "b"]]
{extra}
  - id: c
    className: "org.apache.storm.kafka.spout.KafkaSpoutConfig"
    constructorArgs: [ref: b]
spouts:
  - id: s
    className: "org.apache.storm.kafka.spout.KafkaSpout"
    constructorArgs: [ref: c]
bolts:
  - id: k
    className: "org.apache.storm.kafka.bolt.KafkaBolt"
    configMethods:
      - name: withTopicSelector
        args: ["out"]
      - name: withProducerProperties
        args: [{{"bootstrap.servers": "h:1", "buffer.memory": 1}}]
streams:
  - from: s
    to: k
    grouping: {{type: SHUFFLE}}
"""


def test_by_topic_translator_retry_and_auto_commit(tmp_path):
    extra = """    configMethods:
      - name: setRecordTranslator
        args: [ref: byTopic]
      - name: setRetry
        args: [ref: retry]
      - name: setProp
        args: ["enable.auto.commit", "true"]"""
    text = BUILDER.format(extra=extra).replace("components:\n", """components:
  - id: v
    className: "org.apache.storm.flux.examples.OnlyValueRecordTranslator"
  - id: d
    className: "org.apache.storm.kafka.spout.DefaultRecordTranslator"
  - id: d2
    className: "org.apache.storm.kafka.spout.DefaultRecordTranslator"
  - id: byTopic
    className: "org.apache.storm.kafka.spout.ByTopicRecordTranslator"
    constructorArgs: [ref: d]
    configMethods:
      - name: forTopic
        args: ["b", ref: d2]
  - id: i1
    className: "org.apache.storm.kafka.spout.KafkaSpoutRetryExponentialBackoff$TimeInterval"
    constructorArgs: [500, MILLISECONDS]
  - id: i2
    className: "org.apache.storm.kafka.spout.KafkaSpoutRetryExponentialBackoff$TimeInterval"
    constructorArgs: [2, SECONDS]
  - id: retry
    className: "org.apache.storm.kafka.spout.KafkaSpoutRetryExponentialBackoff"
    constructorArgs: [ref: i1, ref: i1, 5, ref: i2]
""", 1).replace("a\", \"b\"", "a\", \"b\"")
    t = load_text(tmp_path, text)
    conf = _config(t, "s")
    tr = translator("w", conf["kafka.record.translator"], ())
    assert tr.translate("a", 0, 7, "k", "x") == ("default", ["a", 0, 7, "k", "x"])
    assert conf["kafka.retry.initial.delay.ms"] == 500 and conf["kafka.retry.max.delay.ms"] == 2000
    assert conf["kafka.max.retries"] == 5 and conf["kafka.processing.guarantee"] == "NO_GUARANTEE"
    assert "kafka.producer.buffer.memory" not in _config(t, "k")


@pytest.mark.parametrize("extra, line", [
    ("""    properties:
      - name: nosuch
        value: 1""",
     "flux file k.yaml: component 'b' className 'org.apache.storm.kafka.spout.KafkaSpoutConfig$Builder': "
     "property 'nosuch' is not supported"),
    ("""    configMethods:
      - name: setFirstPollOffsetStrategy
        args: [OLDEST]""",
     "flux file k.yaml: spout 's' kafka spout 's': config kafka.first.poll.offset.strategy: expected one of "
     "['EARLIEST', 'LATEST', 'UNCOMMITTED_EARLIEST', 'UNCOMMITTED_LATEST'], found 'OLDEST'"),
])
def test_builder_errors_are_one_line(tmp_path, extra, line):
    with pytest.raises(FluxError) as e:
        load_text(tmp_path, BUILDER.format(extra=extra))
    assert str(e.value) == line


def test_by_topic_translators_with_clashing_fields_are_refused(tmp_path):
    text = BUILDER.format(extra="").replace("components:\n", """components:
  - id: v
    className: "org.apache.storm.flux.examples.OnlyValueRecordTranslator"
  - id: byTopic
    className: "org.apache.storm.kafka.spout.ByTopicRecordTranslator"
    configMethods:
      - name: forTopic
        args: ["b", ref: v]
""", 1)
    with pytest.raises(FluxError) as e:
        load_text(tmp_path, text)
    assert str(e.value) == (
        "flux file k.yaml: component 'byTopic' className 'org.apache.storm.kafka.spout.ByTopicRecordTranslator': "
        "ByTopicRecordTranslator: stream 'default' is declared with fields ['topic', 'partition', 'offset', 'key', "
        "'value'] and ['value']; expected one set of fields per stream")


def test_java_lambda_translator_is_refused(tmp_path):
    text = BUILDER.format(extra="").replace("components:\n", """components:
  - id: simple
    className: "org.apache.storm.kafka.spout.SimpleRecordTranslator"
""", 1)
    with pytest.raises(FluxError) as e:
        load_text(tmp_path, text)
    assert str(e.value) == (
        "flux file k.yaml: component 'simple' className 'org.apache.storm.kafka.spout.SimpleRecordTranslator': "
        "takes a Java lambda (Func), which cannot run here; expected a Python translator class 'module.Class' "
        "with streams() and translate(topic, partition, offset, key, value)")


def test_kafka_bolt_without_a_topic_is_refused(tmp_path):
    text = BUILDER.format(extra="").replace('      - name: withTopicSelector\n        args: ["out"]\n', "")
    with pytest.raises(FluxError) as e:
        load_text(tmp_path, text)
    assert str(e.value) == ("flux file k.yaml: bolt 'k' kafka bolt 'k': config kafka.topic / kafka.topic.field: "
                            "expected at least one of them, found {'kafka.topic': None, 'kafka.topic.field': None}")


def test_default_translator_object_is_accepted():
    assert isinstance(translator("w", RecordTranslator(), ()), RecordTranslator)
