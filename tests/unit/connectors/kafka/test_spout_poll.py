"""The Kafka spout's poll and the engine's idle wait (issue 57): librdkafka's ``consume(n,
timeout)`` returns when ``n`` records came or the timeout ran out, so a 500-record poll at a few
thousand records/s always waited the whole timeout. The spout now looks without waiting; only
after a look that found nothing does it wait, for the first record alone, then takes what else is
ready, and it tells the engine it waited (``heron_waited``) so the spout loop adds no idle wait of
its own. The stand-in client (stand_in.py) records each consume call."""

from __future__ import annotations

from tests.unit.connectors.kafka.stand_in import Broker, _spout


def test_the_spout_waits_only_after_an_empty_look_and_then_for_the_first_record(broker: Broker) -> None:
    spout, _state, _clock, delegate = _spout(mode="ATLEAST_ONCE")
    consumer = broker.consumers[0]
    broker.log[0] += 3
    spout.next_tuple()  # records ready: one look, no wait
    assert consumer.polls == [(500, 0)] and not spout.heron_waited
    assert len(delegate.emitted) == 3
    consumer.polls.clear()
    spout.next_tuple()  # nothing there: a look without waiting, which the engine's flush follows
    assert consumer.polls == [(500, 0)] and not spout.heron_waited
    consumer.polls.clear()
    spout.next_tuple()  # still nothing: now it waits (up to kafka.poll.timeout.ms) for one record
    assert consumer.polls == [(1, 0.02)] and spout.heron_waited
    consumer.polls.clear()
    broker.log[1] += 4
    spout.next_tuple()  # the first record wakes the wait; the rest of what is ready follows at once
    assert consumer.polls == [(1, 0.02), (499, 0)] and spout.heron_waited
    assert len(delegate.emitted) == 7
    consumer.polls.clear()
    spout.next_tuple()  # records came last time: look without waiting again
    assert consumer.polls == [(500, 0)] and not spout.heron_waited


def test_a_next_tuple_that_did_not_poll_never_says_it_waited(broker: Broker) -> None:
    spout, _state, _clock, _delegate = _spout(mode="ATLEAST_ONCE")
    spout.next_tuple()
    spout.next_tuple()
    assert spout.heron_waited
    spout.deactivate()
    spout.next_tuple()  # deactivated: no poll, so the engine's own wait applies
    assert not spout.heron_waited


def test_a_poll_whose_partitions_interleave_moves_each_partition_to_its_last_record(broker: Broker) -> None:
    """Without tracking, a poll moves each partition's position past its last record, however
    the poll's runs of partitions interleave, and emits the records in the poll's order."""
    from tests.unit.connectors.kafka.stand_in import TOPIC, Msg

    spout, _state, _clock, delegate = _spout(mode="ATMOST_ONCE")
    spout.next_tuple()  # the partitions assigned; nothing written yet
    poll = [Msg(0, 0), Msg(0, 1), Msg(1, 5), Msg(0, 2), Msg(1, 6), Msg(1, 7), Msg(0, 3)]
    spout.delivery.received(poll)
    assert [row[1:3] for row in delegate.emitted] == [[m.partition(), m.offset()] for m in poll]
    assert {tp: t.fetched for tp, t in spout.source.trackers.items()} == {(TOPIC, 0): 4, (TOPIC, 1): 8}
    spout.delivery.commit(sync=True)
    assert broker.commits[-1] == {(TOPIC, 0): 4, (TOPIC, 1): 8}


def test_a_tracked_poll_whose_partitions_interleave_is_kept_per_partition_in_order(broker: Broker) -> None:
    """At least once, a poll's records wait per partition (each partition's emit allowance is its
    own), each partition's in the poll's order, however the poll's runs interleave."""
    from tests.unit.connectors.kafka.stand_in import TOPIC, Msg

    class Other(Msg):  # partition 0 of a second topic
        def topic(self) -> str:
            return "other"

    spout, _state, _clock, _delegate = _spout(mode="ATLEAST_ONCE")
    spout.next_tuple()
    poll = [Msg(0, 0), Msg(0, 1), Msg(1, 5), Msg(0, 2), Other(0, 9), Msg(1, 6), Msg(1, 7), Msg(0, 3)]
    spout.delivery.received(poll)
    assert {tp: [m.offset() for m in buf] for tp, buf in spout.reader.buffers.items() if buf} == {
        (TOPIC, 0): [0, 1, 2, 3], (TOPIC, 1): [5, 6, 7], ("other", 0): [9]}
