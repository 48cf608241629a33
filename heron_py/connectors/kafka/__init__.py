"""Kafka in and out (needs ``heron-py[kafka]``: confluent-kafka). See docs/connectors/kafka.md."""

from heron_py.connectors.kafka.bolt import KafkaBolt
from heron_py.connectors.kafka.config import FirstPollOffsetStrategy, ProcessingGuarantee
from heron_py.connectors.kafka.spout import KafkaSpout, round_robin
from heron_py.connectors.kafka.streamlet import KafkaSink, KafkaSource
from heron_py.connectors.kafka.translators import ByTopicRecordTranslator, RecordTranslator, ValueRecordTranslator

__all__ = [
           "ByTopicRecordTranslator",
           "FirstPollOffsetStrategy",
           "KafkaBolt",
           "KafkaSink",
           "KafkaSource",
           "KafkaSpout",
           "ProcessingGuarantee",
           "RecordTranslator",
           "ValueRecordTranslator",
           "round_robin",
]
