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
