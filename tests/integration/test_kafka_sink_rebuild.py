"""The Streamlet KafkaSink after its broker restarted with its state lost, on real Tansu and
the real client, in process: the idempotent producer's records time out (librdkafka loops on
UNKNOWN_PRODUCER_ID without a report), the sink rebuilds its producer and produces every
record still waiting again, so each element put after the restart reaches the new broker."""

import logging

import pytest

from heron_py.connectors.kafka import KafkaSink
from tests.kafka_broker import OutputReader, broker_or_skip
from tests.support import wait_for

pytestmark = pytest.mark.integration


class Ctx:
    def get_task_id(self) -> int:
        return 7


def test_sink_rebuilds_its_producer_and_produces_the_waiting_records_again(tmp_path, caplog):
    (tmp_path / "tansu").mkdir()
    broker = broker_or_skip(tmp_path / "tansu")
    try:
        broker.create_topic("sk-out", 1)
        sink = KafkaSink({"kafka.bootstrap.servers": broker.bootstrap, "kafka.topic": "sk-out",
                          "kafka.producer.message.timeout.ms": 3000}, key=lambda e: e)
        sink.setup(Ctx())
        for i in range(50):
            sink.put(f"a{i}")
        reader = OutputReader(broker.bootstrap, "sk-out")
        wait_for(lambda: reader.poll() >= 50, 30, "the first 50 records")
        reader.c.close()

        broker.stop()
        broker.start()  # same port, empty memory: the topic and the producer id are gone
        broker.create_topic("sk-out", 1)
        caplog.set_level(logging.WARNING, logger="heron_py.streamlet.KafkaSink")
        reader = OutputReader(broker.bootstrap, "sk-out")
        want = {f"b{i}" for i in range(50)}
        sent = 0

        def delivered() -> bool:
            nonlocal sent
            if sent < 50:  # elements keep coming, as in a running topology; put polls the producer
                sink.put(f"b{sent}")
                sent += 1
            else:
                sink._poll(0.1)
            reader.poll()
            return want <= set(reader.got)
        wait_for(delivered, 60, "every element put after the restart in the new broker's topic")
        rebuilt = [r.getMessage() for r in caplog.records if "rebuilding the Kafka producer" in r.getMessage()]
        assert rebuilt, "no producer rebuild logged: the records came some other way"
        assert rebuilt[0].startswith(f"kafka sink task 7: rebuilding the Kafka producer for {broker.bootstrap} "
                                     f"(rebuild 1): ")
        assert sink.rebuilds >= 1 and sink.errors == 0
        sink.cleanup()
        reader.c.close()
    finally:
        broker.stop()
