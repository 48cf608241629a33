"""``emit_rows``, the Redis spout's emit of a read's records: a run emit without the RunIds
that name its runs is refused before any record is registered in flight (a refused call leaves
nothing behind), and the batch and per-record paths register exactly the records they emit."""

from __future__ import annotations

from typing import Any

import pytest

from heron_py.connectors.redis.spout import emit_rows

RECORDS: list[Any] = [(1, ("1-0", ["1-0", "a"])), (2, ("2-0", ["2-0", "b"])), (3, ("3-0", ["3-0", "c"]))]
IDS: list[Any] = [("s", 1), None, ("s", 3)]  # the second is stale: not emitted


def test_a_run_emit_without_its_run_ids_is_refused_before_anything_is_in_flight() -> None:
    inflight: dict[str, Any] = {}
    sent: list[Any] = []
    with pytest.raises(ValueError) as e:
        emit_rows(RECORDS, IDS, inflight, None, sent.append, emit_run=lambda rows, run: sent.append(rows))
    assert str(e.value) == "emit_rows: a run emit needs the RunIds that name its runs"
    assert inflight == {} and sent == []


def test_the_batch_emit_registers_and_sends_only_the_records_with_an_id() -> None:
    inflight: dict[str, Any] = {}
    sent: list[Any] = []
    emit_rows(RECORDS, IDS, inflight, None, sent.append, emit_many=lambda rows, keys: sent.append((rows, keys)))
    assert sent == [([["1-0", "a"], ["3-0", "c"]], [("s", 1), ("s", 3)])]
    assert inflight == {"1-0": ("s", 1), "3-0": ("s", 3)}


def test_the_per_record_emit_registers_and_sends_only_the_records_with_an_id() -> None:
    inflight: dict[str, Any] = {}
    sent: list[Any] = []
    emit_rows(RECORDS, IDS, inflight, None, lambda row, tup_id: sent.append((row, tup_id)))
    assert sent == [(["1-0", "a"], ("s", 1)), (["3-0", "c"], ("s", 3))]
    assert inflight == {"1-0": ("s", 1), "3-0": ("s", 3)}
