"""The write-ahead commits of an effectively-once sink (heron_py/connectors/committing.py),
without I/O: what is staged at a barrier, what a notification or a restore makes due, and that
a failed commit keeps its batch and everything after it."""

from __future__ import annotations

import pytest

from heron_py.connectors.committing import CheckpointCommits, Committer, StagedInput


class Sink:
    def __init__(self) -> None:
        self.written: list[tuple[int, list[str]]] = []
        self.down = False
        self.errors: list[tuple[int, str]] = []

    def commit(self, cid: int, items: list[str]) -> None:
        if self.down:
            raise ConnectionError("server down")
        self.written.append((cid, items))

    def failed(self, cid: int, e: Exception) -> None:
        self.errors.append((cid, str(e)))


def test_inputs_leave_only_with_their_complete_checkpoint_in_order() -> None:
    sink = Sink()
    c: Committer[str] = Committer(CheckpointCommits(), sink.commit, sink.failed)
    for w in "ab":
        c.commits.add(w)
    assert c.commits.barrier(3) == [(3, ["a", "b"])]
    c.commits.add("c")
    assert c.commits.barrier(4) == [(3, ["a", "b"]), (4, ["c"])]
    c.commits.add("d")  # open: after barrier 4
    c.on_complete(3)
    assert sink.written == [(3, ["a", "b"])]
    c.on_complete(7)  # a newer checkpoint's word commits every older batch too
    assert sink.written == [(3, ["a", "b"]), (4, ["c"])]
    assert c.commits.open == ["d"] and c.commits.pending == 1
    assert c.commits.barrier(8) == [(8, ["d"])]
    assert c.commits.barrier(9) == [(8, ["d"])]  # an empty interval stages nothing


def test_a_failed_commit_keeps_its_batch_and_the_later_ones_behind_it() -> None:
    sink = Sink()
    c: Committer[str] = Committer(CheckpointCommits(), sink.commit, sink.failed)
    c.commits.add("a")
    c.commits.barrier(3)
    c.commits.add("b")
    c.commits.barrier(4)
    sink.down = True
    c.on_complete(4)
    assert sink.written == [] and sink.errors == [(3, "server down")] and c.due
    assert not c.run()  # still down: the round stops at the first failure
    assert c.commits.barrier(5) == [(3, ["a"]), (4, ["b"])]  # still in the next checkpoint's state
    sink.down = False
    assert c.run()
    assert sink.written == [(3, ["a"]), (4, ["b"])] and not c.due


def test_a_restore_makes_the_restored_batches_due_and_drops_the_rolled_back_run() -> None:
    sink = Sink()
    c: Committer[str] = Committer(CheckpointCommits(), sink.commit, sink.failed)
    c.on_restored([(3, ["a"]), (5, ["b"])])  # checkpoint 5's state: 3 and 5 not committed yet
    assert c.due
    c.commits.add("c")
    c.commits.barrier(9)  # the new run's batch: due only with checkpoint 9's word
    assert c.run()
    assert sink.written == [(3, ["a"]), (5, ["b"])]
    c.on_complete(9)
    assert sink.written[-1] == (9, ["c"])


def test_barrier_ids_must_grow() -> None:
    c: CheckpointCommits[str] = CheckpointCommits()
    c.add("a")
    c.barrier(5)
    c.add("b")
    with pytest.raises(ValueError) as e:
        c.barrier(5)
    assert str(e.value) == "checkpoint commits: barrier 5 after barrier 5; expected increasing ids"


def test_a_staged_input_is_what_a_mapper_reads_of_a_tuple() -> None:
    class Tup:
        component, stream, values, id = "src", "default", ["w", 1], 42

    assert StagedInput.of(Tup()) == StagedInput("src", "default", ("w", 1), "42")


def test_a_batch_is_not_due_before_its_word_even_the_first_checkpoint() -> None:
    sink = Sink()
    c: Committer[str] = Committer(CheckpointCommits(), sink.commit, sink.failed)
    c.commits.add("a")
    c.commits.barrier(1)
    assert not c.due and c.run() and sink.written == []
    c.on_restored([])  # a clean start: nothing staged, nothing known complete
    c.commits.add("b")
    c.commits.barrier(1)
    assert not c.due
    c.on_complete(1)
    assert sink.written == [(1, ["b"])]
