"""The Kafka spout's offsets kept per emitted batch (heron_py/connectors/kafka/offsets.py): the
message ids, acks, retries, give-ups, stale records after a seek back, revocation, the emit
allowance and the offset each commit may write, with Storm's rules (storm-kafka-client's
OffsetManager: a commit passes an offset only when it and every earlier one are done)."""

from __future__ import annotations

from typing import Any

import pytest

from heron_py.connectors.base import RetryPolicy
from heron_py.connectors.kafka.offsets import KafkaOffsets, run_id

TP0, TP1 = ("t", 0), ("t", 1)


class Rec:
    def __init__(self, offset: int) -> None:
        self._offset = offset

    def offset(self) -> int:
        return self._offset

    def __repr__(self) -> str:
        return f"Rec({self._offset})"


def recs(*offsets: int) -> list[Any]:
    return [Rec(o) for o in offsets]


def offsets_of(records: list[Any]) -> list[int]:
    return [r.offset() for r in records]


def test_a_commit_passes_only_what_is_done_in_order_and_then_the_fetched_position() -> None:
    o = KafkaOffsets(RetryPolicy(), 1000)
    o.assign(TP0, 10)
    fresh1, ids1 = o.emitted(TP0, recs(10, 11, 12))
    fresh2, ids2 = o.emitted(TP0, recs(13, 14))
    assert offsets_of(fresh1) == [10, 11, 12] and offsets_of(fresh2) == [13, 14]
    assert len(set(ids1) | set(ids2)) == 5  # every record its own id
    assert o.commits() == {}  # nothing done: 10 is the commit point already
    o.ack_many([ids1[0], ids1[2], ids2[0]])  # 10, 12, 13: 11 is still in flight
    assert o.commits() == {TP0: 11}
    o.committed({TP0: 11})
    assert o.commits() == {}  # nothing new past the confirmed commit
    o.ack_many([ids1[1], ids2[1]])
    assert o.commits() == {TP0: 15} and o.in_flight() == 0
    assert o.runs == {}  # runs whose records are all done are forgotten


def test_a_late_or_second_ack_changes_nothing_and_an_unknown_id_is_ignored() -> None:
    o = KafkaOffsets(RetryPolicy(), 1000)
    o.assign(TP0, 0)
    _, ids = o.emitted(TP0, recs(0, 1))
    assert o.ack(ids[0]) is True
    assert o.ack(ids[0]) is False  # counted once
    assert o.ack(ids[1] + 10_000) is False and o.fail(ids[1] + 10_000, 0.0) is False  # not a record of its run
    o.ack_many([(999 << 32) + 1])  # no such run
    assert o.stats.acked == 1 and o.commits() == {TP0: 1}


def test_a_failed_record_comes_again_with_its_id_after_the_backoff_and_then_commits() -> None:
    o = KafkaOffsets(RetryPolicy(initial_s=2.0), 1000)
    o.assign(TP0, 0)
    fresh, ids = o.emitted(TP0, recs(0, 1, 2))
    o.ack_many([ids[0], ids[2]])
    assert o.fail(ids[1], now=100.0) is True
    assert o.due_retries(101.0) == []  # the backoff has not passed
    assert o.due_retries(102.0) == [(ids[1], fresh[1])]
    assert o.due_retries(103.0) == []  # handed out once
    assert o.commits() == {TP0: 1}
    o.ack_many([ids[1]])
    assert o.commits() == {TP0: 3}
    assert o.stats.failed == 1 and o.stats.retries == 1


def test_a_record_past_its_retries_is_given_up_and_committed_past() -> None:
    gave_up: list[tuple[Any, ...]] = []
    o = KafkaOffsets(RetryPolicy(max_retries=1), 1000, lambda tp, off, n, rec: gave_up.append((tp, off, n, rec)))
    o.assign(TP0, 0)
    fresh, ids = o.emitted(TP0, recs(0, 1))
    o.ack(ids[1])
    assert o.fail(ids[0], 0.0) is True  # the first failure is retried
    assert o.fail(ids[0], 1.0) is False  # the second is past max_retries
    assert gave_up == [(TP0, 0, 2, fresh[0])]
    assert o.due_retries(100.0) == []  # the retry scheduled before is not handed out
    assert o.commits() == {TP0: 2} and o.stats.given_up == 1
    assert o.fail(ids[0], 2.0) is False  # done: a late fail is ignored


def test_records_read_again_after_a_seek_back_are_stale_and_left_out() -> None:
    o = KafkaOffsets(RetryPolicy(), 1000)
    o.assign(TP0, 0)
    _, ids = o.emitted(TP0, recs(0, 1, 2))
    fresh, more = o.emitted(TP0, recs(1, 2, 3, 4))  # a seek back to 1
    assert offsets_of(fresh) == [3, 4] and len(more) == 2
    assert o.emitted(TP0, recs(2, 3)) == ([], range(0))  # all of it seen before
    o.ack_many([*ids, *more])
    assert o.commits() == {TP0: 5}


def test_records_below_the_commit_point_are_stale() -> None:
    o = KafkaOffsets(RetryPolicy(), 1000)
    o.assign(TP0, 50)
    fresh, _ = o.emitted(TP0, recs(48, 49, 50, 51))
    assert offsets_of(fresh) == [50, 51]


def test_a_compacted_partitions_gaps_are_passed_by_the_commit() -> None:
    o = KafkaOffsets(RetryPolicy(), 1000)
    o.assign(TP0, 0)
    _, ids = o.emitted(TP0, recs(0, 1, 5, 6))
    o.ack_many([ids[0], ids[1]])
    assert o.commits() == {TP0: 5}  # 2-4 never existed; 5 is in flight
    o.ack_many([ids[2], ids[3]])
    assert o.commits() == {TP0: 7}


def test_a_revoked_partitions_records_are_forgotten_and_its_late_acks_ignored() -> None:
    o = KafkaOffsets(RetryPolicy(initial_s=0.0), 1000)
    o.assign(TP0, 0)
    o.assign(TP1, 0)
    _, ids0 = o.emitted(TP0, recs(0, 1))
    _, ids1 = o.emitted(TP1, recs(0))
    o.fail(ids0[0], 0.0)
    o.revoke(TP0)
    assert o.ack(ids0[1]) is False and o.fail(ids0[1], 0.0) is False
    assert o.due_retries(10.0) == []  # the scheduled retry belonged to the revoked partition
    o.ack_many([ids1[0]])
    assert o.commits() == {TP1: 1} and o.in_flight() == 0
    o.assign(TP0, 1)  # back again, from the group's commit: its old runs do not come back
    fresh, new = o.emitted(TP0, recs(1, 2))
    assert offsets_of(fresh) == [1, 2] and not set(new) & set(ids0)


def test_the_emit_allowance_counts_offsets_past_the_commit_point_until_confirmed() -> None:
    o = KafkaOffsets(RetryPolicy(), 4)
    assert o.room(TP0) == 0  # not assigned
    o.assign(TP0, 0)
    assert o.room(TP0) == 4
    _, ids = o.emitted(TP0, recs(0, 1, 2))
    assert o.room(TP0) == 1
    o.ack_many(ids)
    assert o.room(TP0) == 1  # done but not committed: still counted, as Storm counts acked offsets
    o.committed(o.commits())
    assert o.room(TP0) == 4


def test_with_the_commit_point_unknown_the_allowance_counts_from_the_first_record() -> None:
    o = KafkaOffsets(RetryPolicy(), 10)
    o.assign(TP0, -1)  # "earliest"/"latest": the first record says where the partition starts
    o.emitted(TP0, recs(1_000_000, 1_000_001))
    assert o.room(TP0) == 8


def test_untracked_polls_move_the_fetched_position_only_forward() -> None:
    o = KafkaOffsets(RetryPolicy(), 1000)
    o.assign(TP0, 3)
    o.fetched(TP0, 9)
    o.fetched(TP0, 7)
    o.fetched(TP1, 5)  # not assigned: nothing kept
    assert o.commits() == {TP0: 9} and TP1 not in o.trackers


def test_the_counters_count_every_emit_ack_failure_retry_and_give_up() -> None:
    o = KafkaOffsets(RetryPolicy(max_retries=1), 1000)
    o.assign(TP0, 0)
    _, ids = o.emitted(TP0, recs(0, 1, 2))
    _, more = o.emitted(TP0, recs(3, 4))
    assert o.stats.emitted == 5 and o.in_flight() == 5
    o.ack_many([ids[0], ids[1], more[0]])
    o.ack(ids[2])
    assert o.stats.acked == 4 and o.in_flight() == 1
    o.fail(more[1], 0.0)
    assert [i for i, _ in o.due_retries(0.0)] == [more[1]]
    o.fail(more[1], 0.0)  # past max_retries: given up
    assert (o.stats.failed, o.stats.retries, o.stats.given_up) == (2, 1, 1) and o.in_flight() == 0


def test_retries_due_together_come_in_the_order_of_their_failures_and_up_to_the_limit() -> None:
    o = KafkaOffsets(RetryPolicy(initial_s=1.0), 1000)
    o.assign(TP0, 0)
    fresh, ids = o.emitted(TP0, recs(0, 1, 2))
    for i in (ids[2], ids[0], ids[1]):
        o.fail(i, 5.0)
    assert [i for i, _ in o.due_retries(6.0, limit=2)] == [ids[2], ids[0]]
    assert o.due_retries(6.0) == [(ids[1], fresh[1])]


def test_an_id_one_past_its_run_is_not_a_record() -> None:
    o = KafkaOffsets(RetryPolicy(), 1000)
    o.assign(TP0, 0)
    _, ids = o.emitted(TP0, recs(0, 1))
    assert o.ack(ids[-1] + 1) is False and o.fail(ids[-1] + 1, 0.0) is False


def test_calls_for_a_partition_not_assigned_change_nothing() -> None:
    """A commit confirmed after its partition was revoked, a poll's records of one revoked
    meanwhile, a revoke of one never assigned."""
    o = KafkaOffsets(RetryPolicy(), 1000)
    o.revoke(TP1)
    o.committed({TP1: 5})
    o.fetched(TP1, 5)
    assert o.emitted(TP1, recs(0, 1)) == ([], range(0)) and o.trackers == {} and o.stats.emitted == 0


def test_the_first_record_of_an_unknown_start_fixes_where_the_allowance_counts_from() -> None:
    """The first batch starts at offset 0: later batches do not move the start."""
    o = KafkaOffsets(RetryPolicy(), 10)
    o.assign(TP0, -1)
    o.emitted(TP0, recs(0, 1, 2))
    o.emitted(TP0, recs(3, 4))
    assert o.room(TP0) == 5


def test_retries_come_at_most_a_thousand_a_call_and_each_is_counted() -> None:
    o = KafkaOffsets(RetryPolicy(), 5000)
    o.assign(TP0, 0)
    _, ids = o.emitted(TP0, recs(*range(1001)))
    for i in ids:
        o.fail(i, 0.0)
    assert len(o.due_retries(0.0)) == 1000 and len(o.due_retries(0.0)) == 1
    assert o.stats.retries == 1001


def test_each_record_given_up_is_counted() -> None:
    o = KafkaOffsets(RetryPolicy(max_retries=0), 1000)
    o.assign(TP0, 0)
    _, ids = o.emitted(TP0, recs(0, 1))
    assert not o.fail(ids[0], 0.0) and not o.fail(ids[1], 0.0)
    assert o.stats.given_up == 2 and o.commits() == {TP0: 2}


def test_a_run_s_own_id_acks_every_record_of_it_and_mixes_with_record_ids() -> None:
    """The default at least once: a batch is one tuple tree under ``run_id``. Its ack marks
    every record done (counted once each); record ids of another run in the same call too."""
    o = KafkaOffsets(RetryPolicy(), 1000)
    o.assign(TP0, 0)
    _, ids1 = o.emitted(TP0, recs(0, 1, 2))
    _, ids2 = o.emitted(TP0, recs(3, 4))
    whole1, whole2 = run_id(ids1), run_id(ids2)
    assert whole1 not in ids1 and whole1 >> 32 == ids1[0] >> 32 and whole1 != whole2
    o.ack_many([ids2[0], whole1])
    assert o.commits() == {TP0: 4} and o.stats.acked == 4
    assert o.ack(whole2) is True and o.ack(whole2) is False  # only ids2[1] was open
    assert o.commits() == {TP0: 5} and o.stats.acked == 5 and o.in_flight() == 0
    assert o.ack(whole1) is False  # the run is forgotten once committed past
    o.ack_many([whole1])
    assert o.stats.acked == 5
    # a run's id in the middle of a call: the record ids after it are acked too
    _, ids3 = o.emitted(TP0, recs(5, 6))
    _, ids4 = o.emitted(TP0, recs(7, 8))
    o.ack_many([ids3[0], run_id(ids4), ids3[1]])
    assert o.commits() == {TP0: 9} and o.stats.acked == 9


def test_a_failed_run_retries_each_record_not_done_with_its_own_id() -> None:
    o = KafkaOffsets(RetryPolicy(initial_s=1.0, max_retries=1), 1000)
    o.assign(TP0, 0)
    fresh, ids = o.emitted(TP0, recs(0, 1, 2))
    o.ack(ids[1])  # a record acked on its own before (a retry of an earlier failure, say)
    assert o.fail(run_id(ids), now=10.0) is True
    assert o.stats.failed == 2
    assert o.due_retries(11.0) == [(ids[0], fresh[0]), (ids[2], fresh[2])]
    o.ack(ids[0])
    assert o.fail(ids[2], now=12.0) is False  # its one retry spent: given up, committed past
    assert o.commits() == {TP0: 3} and o.stats.given_up == 1
    assert o.fail(run_id(ids), now=13.0) is False  # the run is done: nothing to fail


def test_a_run_holds_fewer_records_than_its_id_space() -> None:
    o = KafkaOffsets(RetryPolicy(), 1 << 40)
    o.assign(TP0, 0)

    class Many(list):  # a batch that says it is 2**32 - 1 records long, holding two
        def __len__(self) -> int:
            return (1 << 32) - 1

    with pytest.raises(ValueError, match="a run holds fewer than 4294967295 records, found 4294967295"):
        o.emitted(TP0, Many(recs(0, 1)))
