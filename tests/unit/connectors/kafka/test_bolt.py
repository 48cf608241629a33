"""The KafkaBolt's pure core (inflight.py) and its producer timeout option: no broker needed.
The bolt against a real broker restarted empty or frozen is tests/integration/test_kafka_outage.py."""

import pytest

from heron_py.connectors.base import ConnectorConfigError
from heron_py.connectors.kafka.config import bolt_config
from heron_py.connectors.kafka.inflight import MSG_TIMED_OUT, PURGE_QUEUE, InFlight, rebuild_reason

W = "kafka bolt 'sink' task 3"
BASE = {"kafka.bootstrap.servers": "127.0.0.1:9092", "kafka.topic": "out"}


def test_pop_returns_each_input_once_and_none_after_take_all():
    f = InFlight()
    a, b, c = f.add("a", 1.0), f.add("b", 2.0), f.add("c", 3.0)
    assert f.pop(b) == "b"
    assert f.pop(b) is None  # a second report of the same record acks nothing
    assert f.take_all() == ["a", "c"]
    assert len(f) == 0
    # the purge of the old producer reports a and c again: already failed, so ignored
    assert f.pop(a) is None and f.pop(c) is None


def test_oldest_skips_reported_inputs_and_overdue_uses_it():
    f = InFlight()
    a = f.add("a", 10.0)
    f.add("b", 12.0)
    assert f.oldest_sent_at() == 10.0
    f.pop(a)
    assert f.oldest_sent_at() == 12.0
    assert not f.overdue(now=16.9, limit_s=5.0)
    assert f.overdue(now=17.1, limit_s=5.0)
    f.take_all()
    assert f.oldest_sent_at() is None and not f.overdue(now=1e9, limit_s=5.0)


def test_rebuild_on_fatal_error_or_timeout_only():
    assert rebuild_reason(MSG_TIMED_OUT, False, "Local: Message timed out") == (
        "a record had no delivery report within message.timeout.ms (Local: Message timed out)")
    assert rebuild_reason(-150, True, "Broker: Out of order sequence number") == (
        "fatal producer error: Broker: Out of order sequence number")
    assert rebuild_reason(PURGE_QUEUE, False, "Local: Purged in queue") is None
    assert rebuild_reason(2, False, "Broker: Corrupt message") is None


def test_message_timeout_follows_the_topology_unless_set():
    assert bolt_config(BASE, W).message_timeout_ms == 30_000
    cfg = bolt_config({**BASE, "topology.message.timeout.secs": 5}, W)
    assert cfg.client_config()["message.timeout.ms"] == 5_000
    cfg = bolt_config({**BASE, "topology.message.timeout.secs": 5, "kafka.producer.message.timeout.ms": "3000"}, W)
    assert cfg.client_config()["message.timeout.ms"] == 3_000
    assert "message.timeout.ms" not in dict(cfg.producer)  # one value, not two
    cfg = bolt_config({**BASE, "kafka.producer.delivery.timeout.ms": 7000}, W)
    assert cfg.client_config()["message.timeout.ms"] == 7_000
    assert "delivery.timeout.ms" not in cfg.client_config()


def test_bad_message_timeout_is_one_line():
    with pytest.raises(ConnectorConfigError) as e:
        bolt_config({**BASE, "kafka.producer.message.timeout.ms": "soon"}, W)
    assert str(e.value) == ("kafka bolt 'sink' task 3: config kafka.producer.message.timeout.ms: "
                            "expected an integer >= 1, found 'soon'")


def test_after_a_poll_the_callbacks_reason_wins_then_the_backstop():
    from heron_py.connectors.kafka.inflight import rebuild_after_poll

    waiting = InFlight()
    assert rebuild_after_poll(None, waiting, 100.0, 35.0) is None  # nothing waits
    waiting.add("t1", 10.0)
    assert rebuild_after_poll(None, waiting, 45.0, 35.0) is None  # waited 35 s: not over
    assert rebuild_after_poll(None, waiting, 45.5, 35.0) == "no delivery report for over 35 s"
    assert rebuild_after_poll("fatal producer error: x", waiting, 45.5, 35.0) == "fatal producer error: x"
