"""Each grouping kind on a real run (2 containers, 3 consumer tasks): the routing property holds."""

from collections import defaultdict

import pytest

from heron_py.state import LocalFsStateManager
from heron_py.testing import run_local
from heron_py.testing.local import kill_local
from tests.conftest import EXAMPLES

pytestmark = pytest.mark.integration

G = EXAMPLES / "groupings"
COUNT = 1000


def _run(home, example, expect, component="record"):
    run = run_local(G / example, [], home=home, capture=[component],
                    until=lambda r: len(r[component]) >= expect, timeout=60, keep_running=True)
    state = LocalFsStateManager(home)
    packing = state.get_packing_plan(run.name)
    kill_local(home, run.name)
    rows = run.received[component]
    assert len(rows) == expect
    return rows, packing


def _tasks_by_value(rows, index):
    out = defaultdict(set)
    for r in rows:
        out[r["values"][index]].add(r["task"])
    return out


@pytest.mark.parametrize("example", ["shuffle_grouping.py", "none_grouping.py"])
def test_shuffle_and_none_send_each_tuple_to_one_task_spread_over_all(heron_home, example):
    rows, packing = _run(heron_home, example, COUNT)
    by_n = _tasks_by_value(rows, 0)
    assert sorted(by_n) == list(range(COUNT))
    assert all(len(t) == 1 for t in by_n.values())
    per_task = defaultdict(int)
    for r in rows:
        per_task[r["task"]] += 1
    assert set(per_task) == set(packing.tasks_of("record"))
    assert min(per_task.values()) >= COUNT // 3 - 50  # round robin: even within a batch's rounding


def test_fields_sends_each_key_to_exactly_one_task(heron_home):
    rows, packing = _run(heron_home, "fields_grouping.py", COUNT)
    by_key = _tasks_by_value(rows, 1)
    assert len(by_key) == 50
    assert all(len(t) == 1 for t in by_key.values())
    assert {t for ts in by_key.values() for t in ts} == set(packing.tasks_of("record"))


def test_all_sends_every_tuple_to_every_task(heron_home):
    rows, packing = _run(heron_home, "all_grouping.py", 3 * COUNT)
    by_n = _tasks_by_value(rows, 0)
    assert len(by_n) == COUNT
    assert all(t == set(packing.tasks_of("record")) for t in by_n.values())


def test_lowest_sends_everything_to_the_lowest_task(heron_home):
    rows, packing = _run(heron_home, "lowest_grouping.py", COUNT)
    assert {r["task"] for r in rows} == {min(packing.tasks_of("record"))}


def test_local_or_shuffle_prefers_tasks_in_the_emitters_container(heron_home):
    rows, packing = _run(heron_home, "local_or_shuffle_grouping.py", COUNT)
    container = {t.task_id: t.container for t in packing.tasks}
    spout_container = container[packing.tasks_of("numbers")[0]]
    local = {t for t in packing.tasks_of("record") if container[t] == spout_container}
    assert local, "the packing should put a record task beside the spout"
    assert {r["task"] for r in rows} == local


def test_partial_key_uses_at_most_two_tasks_per_key(heron_home):
    rows, _ = _run(heron_home, "partial_key_grouping.py", COUNT)
    by_key = _tasks_by_value(rows, 1)
    assert len(by_key) == 50
    assert all(1 <= len(t) <= 2 for t in by_key.values())
    assert any(len(t) == 2 for t in by_key.values())  # 20 tuples per key: the load is split


def test_custom_grouping_decides(heron_home):
    rows, packing = _run(heron_home, "custom_grouping.py", COUNT)
    targets = packing.tasks_of("record")
    for r in rows:
        assert r["task"] == (targets[0] if r["values"][0] % 2 == 0 else targets[-1])


def test_direct_emit_reaches_the_chosen_task_and_named_streams_stay_apart(heron_home):
    rows, packing = _run(heron_home, "direct_grouping.py", COUNT // 10, component="tens_bolt")
    targets = packing.tasks_of("tens_bolt")
    assert sorted(r["values"][0] for r in rows) == list(range(0, COUNT, 10))
    for r in rows:
        assert r["stream"] == "tens"
        assert r["task"] == targets[(r["values"][0] // 10) % len(targets)]
