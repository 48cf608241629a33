"""The KafkaSpout's group commits under effectively once, with no broker: a stand-in client
(the confluent_kafka names the spout uses, commit callbacks delivered at the next consume as the
real client does) and the spout driven as the instance drives it (init_state, initialize,
next_tuple, pre_save, and the master's word through ``StatefulTask.checkpoint_committed``).

- checkpoint N's positions are not committed before the master says N is complete, then exactly
  they are; a later word M commits M's saved positions, skipping older ones;
- the spout never opens the checkpoint storage (it works with no heron home nor root, and
  writes nothing);
- a restore commits the restored positions of the partitions the task holds, once assigned;
- a failed commit is logged once and retried at the periodic commit until confirmed (or
  superseded by a newer word).

The spout against a real broker through process kills: tests/integration/test_kafka_effectively_once.py."""

from __future__ import annotations

from typing import Any

import pytest

from heron_py.connectors.kafka.spout import POSITIONS_KEY
from tests.unit.connectors.kafka.stand_in import TOPIC, Broker, Context, _pos, _run, _spout, _word


def test_positions_are_committed_only_at_the_masters_word_for_their_checkpoint(broker: Broker) -> None:
    spout, state, clock, delegate = _spout()
    _run(spout, broker, clock, 5)
    assert len(delegate.emitted) == 10
    spout.pre_save("1")
    assert state.get(POSITIONS_KEY) == {(TOPIC, 0): 5, (TOPIC, 1): 5}
    _run(spout, broker, clock, 3, periodic=True)
    spout.pre_save("2")
    _run(spout, broker, clock, 2, periodic=True)
    _run(spout, broker, clock, periodic=True)
    assert broker.commits == []  # saved, not known complete: never committed, periodic point or not

    _word(spout, 1)
    assert broker.commits == [_pos(5, 5)]  # checkpoint 1's, not the newer live positions (10)
    _run(spout, broker, clock, periodic=True)  # the confirmation comes; nothing to retry
    assert broker.commits == [_pos(5, 5)] and broker.group == _pos(5, 5)

    _run(spout, broker, clock, 4)
    spout.pre_save("3")
    _word(spout, 3)  # 2 and 3 complete: 3's positions, 2's skipped
    assert broker.commits == [_pos(5, 5), _pos(14, 14)]
    assert spout._checkpoints is not None and spout._checkpoints.saved == {}
    _run(spout, broker, clock, periodic=True)
    assert broker.group == _pos(14, 14) and len(broker.commits) == 2


def test_a_word_commits_the_newest_saved_at_or_below_it_and_keeps_newer_ones(broker: Broker) -> None:
    spout, _state, clock, _delegate = _spout()
    _word(spout, 1)  # nothing saved yet
    for cid, n in ((2, 3), (3, 4), (5, 2)):
        _run(spout, broker, clock, n)
        spout.pre_save(str(cid))
    _word(spout, 4)  # 4 was never this task's (or was aborted): 3 is the newest at or below it
    assert broker.commits == [_pos(7, 7)]
    assert spout._checkpoints is not None and list(spout._checkpoints.saved) == [5]
    _run(spout, broker, clock)  # the commit's confirmation
    _word(spout, 4)  # a repeated word: nothing new
    _word(spout, 2)  # a late word for an older checkpoint: its positions are gone, nothing moves back
    _run(spout, broker, clock, periodic=True)
    assert broker.commits == [_pos(7, 7)] and broker.group == _pos(7, 7)
    _word(spout, 5)
    assert broker.commits == [_pos(7, 7), _pos(9, 9)]


def test_a_restore_commits_the_restored_positions_once_assigned(broker: Broker) -> None:
    broker.log = {0: 20, 1: 20}
    broker.group = _pos(3, 4)  # older commits: the restored checkpoint is newer
    broker.down = True  # the consumer cannot be assigned yet
    spout, _state, clock, delegate = _spout([[TOPIC, 0, 10], [TOPIC, 1, 12]])
    _run(spout, broker, clock)
    assert broker.commits == []  # nothing assigned: nothing committed yet
    broker.down = False
    clock.now += 5  # the next partition refresh (every 2 s), before the periodic commit
    spout.next_tuple()
    assert broker.commits == [_pos(10, 12)]
    assert broker.consumers[0].position == {0: 20, 1: 20}  # sought to the restored positions, then read
    assert sorted(v[4] for v in delegate.emitted)[:2] == ["0:10", "0:11"]
    assert len(delegate.emitted) == 18
    _run(spout, broker, clock, periodic=True)
    assert broker.group == _pos(10, 12) and len(broker.commits) == 1
    assert any("restored positions t-0@10, t-1@12" in line for line, _ in delegate.lines)


def test_a_restore_commits_only_the_partitions_the_task_holds(broker: Broker) -> None:
    # two tasks: partition 0 is task 1's, partition 1 task 2's (round robin over sorted partitions)
    spout, _state, clock, _delegate = _spout([[TOPIC, 0, 10], [TOPIC, 1, 12]], context=Context(2, (1, 2)))
    broker.log = {0: 10, 1: 12}
    _run(spout, broker, clock)
    assert broker.commits == [{(TOPIC, 1): 12}]


def test_a_clean_start_commits_nothing_before_a_word(broker: Broker) -> None:
    spout, _state, clock, _delegate = _spout([])
    _run(spout, broker, clock, 5, periodic=True)
    spout.close()
    assert broker.commits == []


def test_a_refused_commit_is_logged_once_and_retried_at_the_periodic_commit(broker: Broker) -> None:
    spout, _state, clock, delegate = _spout()
    _run(spout, broker, clock, 5)
    spout.pre_save("1")
    broker.refuse_calls = 2

    def refusals() -> list[str]:
        return [line for line, level in delegate.lines if level == "warn" and "commit refused" in line]
    _word(spout, 1)
    for _ in range(5):
        _run(spout, broker, clock)  # before the period: no retry, no other line
    assert broker.commits == [] and broker.refuse_calls == 1
    assert len(refusals()) == 1
    _run(spout, broker, clock, periodic=True)  # refused again: one line for the retry
    assert broker.commits == [] and broker.refuse_calls == 0 and len(refusals()) == 2
    _run(spout, broker, clock, periodic=True)
    assert broker.commits == [_pos(5, 5)]
    _run(spout, broker, clock, periodic=True)  # confirmed: not committed again
    assert broker.commits == [_pos(5, 5)] and broker.group == _pos(5, 5) and len(refusals()) == 2


def test_a_commit_the_broker_fails_is_retried_until_confirmed(broker: Broker) -> None:
    spout, _state, clock, delegate = _spout()
    _run(spout, broker, clock, 5)
    spout.pre_save("1")
    broker.fail_async = 1
    _word(spout, 1)
    _run(spout, broker, clock)  # the failure comes back in the commit callback
    assert broker.group == {}
    assert any(level == "warn" and "COORDINATOR_NOT_AVAILABLE" in line for line, level in delegate.lines)
    _run(spout, broker, clock, periodic=True)
    _run(spout, broker, clock, periodic=True)
    assert broker.commits == [_pos(5, 5), _pos(5, 5)] and broker.group == _pos(5, 5)


def test_a_newer_word_supersedes_a_failed_commit(broker: Broker) -> None:
    spout, _state, clock, _delegate = _spout()
    _run(spout, broker, clock, 5)
    spout.pre_save("1")
    broker.refuse_calls = 1
    _word(spout, 1)
    _run(spout, broker, clock, 2)
    spout.pre_save("2")
    _word(spout, 2)
    _run(spout, broker, clock, periodic=True)
    assert broker.commits == [_pos(7, 7)] and broker.group == _pos(7, 7)


def test_the_spout_reads_and_writes_no_checkpoint(broker: Broker, tmp_path: Any) -> None:
    spout, _state, clock, _delegate = _spout([[TOPIC, 0, 0]])
    _run(spout, broker, clock, 5)
    spout.pre_save("1")
    _word(spout, 1)
    _run(spout, broker, clock, periodic=True)
    spout.close()
    assert broker.group == _pos(5, 5)
    assert not hasattr(spout, "_storage")
    assert list(tmp_path.iterdir()) == []  # no checkpoints/ folder under the working directory


@pytest.mark.parametrize("mode", ["ATLEAST_ONCE", "ATMOST_ONCE"])
def test_other_modes_ignore_a_word(broker: Broker, mode: str) -> None:
    spout, _state, clock, _delegate = _spout(mode=mode)
    spout.on_checkpoint_complete(1)
    _run(spout, broker, clock, 5)
    spout.on_checkpoint_complete(2)
    assert broker.commits == []  # their commits are periodic (none came yet), whatever the word
    assert spout._checkpoints is None  # no positions kept: another delivery mode
