"""The Kafka spout's rows for the built-in translators (heron_py.connectors.kafka.spout.record_values
and, a batch at a time, record_rows),
which the batch emits use: the same values as the translator's own translate(), and None for a
user's translator (it picks the stream or skips a record)."""

import pytest

from heron_py.connectors.kafka.spout import record_rows, record_values
from heron_py.connectors.kafka.translators import RecordTranslator, ValueRecordTranslator, deserializer


class Msg:
    def __init__(self, key, value, topic="t", partition=2, offset=41):
        self._k, self._v, self._t, self._p, self._o = key, value, topic, partition, offset

    def key(self):
        return self._k

    def value(self):
        return self._v

    def topic(self):
        return self._t

    def partition(self):
        return self._p

    def offset(self):
        return self._o


MSGS = [Msg(b"k", b"v\xe2\x82\xac"), Msg(None, b"only value"), Msg(b"k2", None), Msg(b"\xff", b"\xfe")]


@pytest.mark.parametrize("translator", [RecordTranslator(), ValueRecordTranslator()])
@pytest.mark.parametrize("kind", ["string", "bytes"])
def test_rows_are_what_translate_gives_on_the_default_stream(translator, kind):
    kde = deserializer("w", "kafka.key.deserializer", kind)
    vde = deserializer("w", "kafka.value.deserializer", kind)
    values = record_values(translator, kde, vde, strings=kind == "string")
    assert values is not None
    for m in MSGS:
        stream, expected = translator.translate(m.topic(), m.partition(), m.offset(), kde(m.topic(), m.key()),
                                                vde(m.topic(), m.value()))
        assert stream == "default"
        assert values(m) == list(expected)
    # a batch of one partition's records: each row what values() gives (the default translator
    # with strings builds them inline, its topic and partition the batch's)
    rows = record_rows(values, kind == "string" and type(translator) is RecordTranslator)
    assert rows is not None
    assert rows(("t", 2), iter(MSGS)) == [values(m) for m in MSGS]


def test_a_users_translator_has_no_row():
    class Mine(RecordTranslator):
        def translate(self, topic, partition, offset, key, value):
            return None

    kde = deserializer("w", "kafka.key.deserializer", "string")
    assert record_values(Mine(), kde, kde, strings=True) is None
    assert record_rows(None, True) is None
