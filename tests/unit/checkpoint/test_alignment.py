"""Marker alignment (issue 17): every Save(C) sees a consistent cut, nothing is lost, duplicated or reordered."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from heron_py.checkpoint.alignment import (
    Abort,
    AlignAction,
    AlignmentBufferFull,
    AlignmentConfig,
    AlignState,
    Deliver,
    Forward,
    Ignored,
    MarkerAligner,
    Save,
    SpoutCheckpoint,
    UnknownChannelError,
)

Tup = tuple[int, int]  # (channel, sequence number on that channel)


@st.composite
def runs(draw: st.DrawFn, max_markers: int) -> tuple[dict[int, list[object]], list[int], int]:
    """Per channel: tuples, marker 1, tuples, marker 2, ... tuples; and an interleaving of the channels."""
    channels = draw(st.lists(st.integers(0, 50), min_size=1, max_size=4, unique=True))
    k = draw(st.integers(1, max_markers))
    plan: dict[int, list[object]] = {}
    for ch in channels:
        seq, events = 0, list[object]()
        for segment in range(k + 1):
            for _ in range(draw(st.integers(0, 4))):
                events.append((ch, seq))
                seq += 1
            if segment < k:
                events.append(("M", segment + 1))
        plan[ch] = events
    remaining = {ch: len(ev) for ch, ev in plan.items()}
    order = []
    while any(remaining.values()):
        ch = draw(st.sampled_from(sorted(c for c, n in remaining.items() if n)))
        order.append(ch)
        remaining[ch] -= 1
    return plan, order, k


def drive(plan: dict[int, list[object]], order: list[int]) -> tuple[list[Tup], dict[int, list[Tup]], list[object]]:
    """Feed the events; play the component: returns what it processed, its snapshot at each Save, all actions."""
    aligner: MarkerAligner[Tup] = MarkerAligner(7, plan, AlignmentConfig(max_held_bytes=10_000))
    cursor = dict.fromkeys(plan, 0)
    processed: list[Tup] = []
    snapshots: dict[int, list[Tup]] = {}
    log: list[object] = []
    for ch in order:
        ev = plan[ch][cursor[ch]]
        cursor[ch] += 1
        assert isinstance(ev, tuple)
        actions: list[AlignAction[Tup]] = (
            aligner.on_marker(ch, ev[1]) if ev[0] == "M" else aligner.on_tuples(ch, ev, nbytes=3))
        for a in actions:
            log.append(a)
            if isinstance(a, Deliver):
                assert a.batch[0] == a.channel
                processed.append(a.batch)
            elif isinstance(a, Save):
                assert a.checkpoint_id not in snapshots
                snapshots[a.checkpoint_id] = list(processed)
    assert aligner.state is AlignState.IDLE
    assert aligner.held_bytes == 0 and aligner.held_batches == 0
    return processed, snapshots, log


def before_marker(plan: dict[int, list[object]], checkpoint_id: int) -> set[Tup]:
    out: set[Tup] = set()
    for events in plan.values():
        for ev in events:
            if ev == ("M", checkpoint_id):
                break
            assert isinstance(ev, tuple)
            if ev[0] != "M":
                out.add((ev[0], ev[1]))
    return out


def check_no_loss_dup_order(plan: dict[int, list[object]], processed: list[Tup]) -> None:
    sent = [ev for events in plan.values() for ev in events if isinstance(ev, tuple) and ev[0] != "M"]
    assert sorted(processed) == sorted(sent)  # nothing lost, nothing twice
    for ch in plan:
        mine = [seq for c, seq in processed if c == ch]
        assert mine == sorted(mine)  # per-channel order kept


@settings(max_examples=300, deadline=None)
@given(runs(max_markers=1))
def test_one_checkpoint_snapshot_is_exactly_the_cut(run: tuple[dict[int, list[object]], list[int], int]) -> None:
    plan, order, _ = run
    processed, snapshots, log = drive(plan, order)
    assert list(snapshots) == [1]
    assert set(snapshots[1]) == before_marker(plan, 1)
    assert len(snapshots[1]) == len(before_marker(plan, 1))
    i = log.index(Save(1))
    assert log[i + 1] == Forward(1)  # forward right after save, before any held input
    assert not any(isinstance(a, (Abort, Ignored)) for a in log)
    check_no_loss_dup_order(plan, processed)


@settings(max_examples=300, deadline=None)
@given(runs(max_markers=3))
def test_several_checkpoints_every_save_is_a_cut(run: tuple[dict[int, list[object]], list[int], int]) -> None:
    """Markers of a newer checkpoint may overtake an older one's alignment: the older is aborted,
    but every Save still sees exactly its cut, and the newest always completes."""
    plan, order, k = run
    processed, snapshots, log = drive(plan, order)
    assert k in snapshots
    for cid, snap in snapshots.items():
        assert set(snap) == before_marker(plan, cid)
        assert len(snap) == len(set(snap))
        assert log[log.index(Save(cid)) + 1] == Forward(cid)
    assert list(snapshots) == sorted(snapshots)
    aborted = {a.checkpoint_id for a in log if isinstance(a, Abort)}
    assert aborted.isdisjoint(snapshots)
    check_no_loss_dup_order(plan, processed)


def test_buffer_overflow_is_a_clear_error_and_abort_releases_in_order() -> None:
    a: MarkerAligner[str] = MarkerAligner(3, [1, 2], AlignmentConfig(max_held_bytes=10))
    assert a.on_marker(1, 5) == []
    assert a.on_tuples(1, "x", 6) == []
    assert a.on_tuples(2, "y", 100) == [Deliver(2, "y")]  # not blocked: passes whatever its size
    with pytest.raises(AlignmentBufferFull) as e:
        a.on_tuples(1, "z", 5)
    assert str(e.value) == ("task 3: checkpoint 5 alignment buffer full: a batch of 5 bytes from channel 1 "
                            "would hold 11 bytes, limit 10 bytes; still waiting for the marker from channels [2]")
    assert (e.value.held_bytes, e.value.limit, e.value.waiting_for) == (6, 10, [2])
    assert a.held_bytes == 6 and a.held_batches == 1  # the refused batch was not taken
    assert a.abort("buffer full") == [Abort(5, "buffer full"), Deliver(1, "x")]
    assert a.on_tuples(1, "z", 5) == [Deliver(1, "z")]
    assert a.on_marker(2, 5) == [Ignored(2, 5, "old checkpoint (newest seen 5)")]
    assert a.state is AlignState.IDLE


def test_save_forward_then_held_input_in_arrival_order() -> None:
    a: MarkerAligner[str] = MarkerAligner(1, [1, 2, 3])
    a.on_marker(2, 1)
    a.on_tuples(2, "b1", 1)
    a.on_marker(1, 1)
    a.on_tuples(1, "a1", 1)
    a.on_tuples(2, "b2", 1)
    assert a.waiting_for == {3} and a.held_bytes == 3
    assert a.on_tuples(3, "c0", 1) == [Deliver(3, "c0")]
    assert a.on_marker(3, 1) == [Save(1), Forward(1), Deliver(2, "b1"), Deliver(1, "a1"), Deliver(2, "b2")]


def test_duplicate_old_and_newer_markers() -> None:
    a: MarkerAligner[str] = MarkerAligner(1, [1, 2])
    a.on_marker(1, 4)
    assert a.on_marker(1, 4) == [Ignored(1, 4, "duplicate marker")]
    assert a.on_marker(2, 3) == [Ignored(2, 3, "old checkpoint (newest seen 4)")]
    a.on_tuples(1, "held", 2)
    # a newer marker aborts 4: what was held came before marker 5 on its channel, so it goes first
    assert a.on_marker(2, 5) == [Abort(4, "superseded by checkpoint 5 (marker on channel 2)"), Deliver(1, "held")]
    assert a.checkpoint_id == 5 and a.waiting_for == {1}
    assert a.on_marker(1, 4) == [Ignored(1, 4, "old checkpoint (newest seen 5)")]
    assert a.on_marker(1, 5) == [Save(5), Forward(5)]
    assert a.on_marker(2, 5) == [Ignored(2, 5, "old checkpoint (newest seen 5)")]


def test_removed_channel_stops_the_wait_and_reset_drops_held_input() -> None:
    a: MarkerAligner[str] = MarkerAligner(1, [1, 2, 3])
    a.on_marker(1, 1)
    a.on_tuples(1, "h", 1)
    assert a.remove_channel(3) == []
    assert a.remove_channel(2) == [Save(1), Forward(1), Deliver(1, "h")]
    assert a.channels == {1}
    with pytest.raises(ValueError, match="cannot remove channel 1, the only input channel"):
        a.remove_channel(1)
    b: MarkerAligner[str] = MarkerAligner(1, [1, 2])
    b.on_marker(1, 9)
    b.on_tuples(1, "h", 1)
    assert b.reset([1, 2, 4]) == 1
    assert b.state is AlignState.IDLE and b.held_bytes == 0
    # after a restore a restarted master may reuse id 9
    assert b.on_marker(4, 9) == []
    assert b.waiting_for == {1, 2}


def test_unknown_channel_and_bad_sizes() -> None:
    a: MarkerAligner[str] = MarkerAligner(6, [1, 2])
    with pytest.raises(UnknownChannelError) as e:
        a.on_tuples(5, "x", 1)
    assert str(e.value) == "task 6: tuples from channel 5, expected one of the input channels [1, 2]"
    with pytest.raises(UnknownChannelError, match="a marker from channel 5"):
        a.on_marker(5, 1)
    with pytest.raises(ValueError, match="nbytes must be >= 0, found -1"):
        a.on_tuples(1, "x", -1)
    with pytest.raises(ValueError, match="at least one input channel"):
        MarkerAligner(6, [])
    with pytest.raises(ValueError, match="max_held_bytes must be > 0, found 0"):
        AlignmentConfig(max_held_bytes=0)


def test_single_channel_saves_at_once() -> None:
    a: MarkerAligner[str] = MarkerAligner(1, [8])
    assert a.on_tuples(8, "a", 1) == [Deliver(8, "a")]
    assert a.on_marker(8, 1) == [Save(1), Forward(1)]
    assert a.on_tuples(8, "b", 1) == [Deliver(8, "b")]


def test_spout_saves_then_emits_marker_once_per_checkpoint() -> None:
    s = SpoutCheckpoint(2)
    assert s.on_start_checkpoint(1) == [Save(1), Forward(1)]
    assert s.on_start_checkpoint(1) == [Ignored(None, 1, "duplicate start")]
    assert s.on_start_checkpoint(3) == [Save(3), Forward(3)]
    assert s.on_start_checkpoint(2) == [Ignored(None, 2, "old checkpoint (newest 3)")]
    assert s.last_checkpoint_id == 3
    s.reset()
    assert s.on_start_checkpoint(2) == [Save(2), Forward(2)]
