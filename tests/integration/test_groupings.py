"""Each grouping kind on a real run (2 containers, 3 consumer tasks per grouping): the routing
property holds. One topology carries them all (examples/groupings/all_groupings.py: a consumer
per grouping), launched once for the module; each example file on its own is checked to build
the grouping it names, without a launch."""

from collections import defaultdict

import pytest

from heron_py.cli.submit import load_topology_file
from heron_py.state import LocalFsStateManager
from heron_py.testing import run_local
from heron_py.testing.local import kill_local
from tests.conftest import EXAMPLES

pytestmark = pytest.mark.integration

G = EXAMPLES / "groupings"
COUNT = 1000
# what each consumer receives in all: ALL copies every tuple to its 3 tasks; tens_bolt gets the
# multiples of 10
EXPECT = {"record_shuffle": COUNT, "record_none": COUNT, "record_fields": COUNT, "record_all": 3 * COUNT,
          "record_lowest": COUNT, "record_local_or_shuffle": COUNT, "record_partial_key": COUNT,
          "record_custom": COUNT, "tens_bolt": COUNT // 10}


@pytest.fixture(scope="module")
def all_groupings(tmp_path_factory):
    home = tmp_path_factory.mktemp("groupings") / "heron-home"
    home.mkdir()
    run = run_local(G / "all_groupings.py", [], home=home, capture=list(EXPECT),
                    until=lambda r: all(len(r[c]) >= n for c, n in EXPECT.items()), timeout=60, keep_running=True)
    try:
        packing = LocalFsStateManager(home).get_packing_plan(run.name)
    finally:
        kill_local(home, run.name)
    for component, n in EXPECT.items():
        assert len(run.received[component]) == n, component
    return run.received, packing


def _run(all_groupings, component):
    received, packing = all_groupings
    return received[component], packing


@pytest.mark.parametrize(("example", "component", "grouping"), [
    ("shuffle_grouping.py", "record", "SHUFFLE"), ("none_grouping.py", "record", "NONE"),
    ("fields_grouping.py", "record", "FIELDS"), ("all_grouping.py", "record", "ALL"),
    ("lowest_grouping.py", "record", "LOWEST"), ("local_or_shuffle_grouping.py", "record", "LOCAL_OR_SHUFFLE"),
    ("partial_key_grouping.py", "record", "PARTIAL_KEY"), ("custom_grouping.py", "record", "CUSTOM"),
    ("direct_grouping.py", "tens_bolt", "DIRECT")])
def test_each_example_builds_the_grouping_it_names(example, component, grouping):
    topo = load_topology_file(G / example, [])
    assert [i.grouping.kind.name for i in topo.component(component).inputs] == [grouping]


def _tasks_by_value(rows, index):
    out = defaultdict(set)
    for r in rows:
        out[r["values"][index]].add(r["task"])
    return out


@pytest.mark.parametrize("component", ["record_shuffle", "record_none"])
def test_shuffle_and_none_send_each_tuple_to_one_task_spread_over_all(all_groupings, component):
    rows, packing = _run(all_groupings, component)
    by_n = _tasks_by_value(rows, 0)
    assert sorted(by_n) == list(range(COUNT))
    assert all(len(t) == 1 for t in by_n.values())
    per_task = defaultdict(int)
    for r in rows:
        per_task[r["task"]] += 1
    assert set(per_task) == set(packing.tasks_of(component))
    assert min(per_task.values()) >= COUNT // 3 - 50  # round robin: even within a batch's rounding


def test_fields_sends_each_key_to_exactly_one_task(all_groupings):
    rows, packing = _run(all_groupings, "record_fields")
    by_key = _tasks_by_value(rows, 1)
    assert len(by_key) == 50
    assert all(len(t) == 1 for t in by_key.values())
    assert {t for ts in by_key.values() for t in ts} == set(packing.tasks_of("record_fields"))


def test_all_sends_every_tuple_to_every_task(all_groupings):
    rows, packing = _run(all_groupings, "record_all")
    by_n = _tasks_by_value(rows, 0)
    assert len(by_n) == COUNT
    assert all(t == set(packing.tasks_of("record_all")) for t in by_n.values())


def test_lowest_sends_everything_to_the_lowest_task(all_groupings):
    rows, packing = _run(all_groupings, "record_lowest")
    assert {r["task"] for r in rows} == {min(packing.tasks_of("record_lowest"))}


def test_local_or_shuffle_prefers_tasks_in_the_emitters_container(all_groupings):
    rows, packing = _run(all_groupings, "record_local_or_shuffle")
    container = {t.task_id: t.container for t in packing.tasks}
    spout_container = container[packing.tasks_of("numbers")[0]]
    local = {t for t in packing.tasks_of("record_local_or_shuffle") if container[t] == spout_container}
    assert local, "the packing should put a record task beside the spout"
    assert {r["task"] for r in rows} == local


def test_partial_key_uses_at_most_two_tasks_per_key(all_groupings):
    rows, _ = _run(all_groupings, "record_partial_key")
    by_key = _tasks_by_value(rows, 1)
    assert len(by_key) == 50
    assert all(1 <= len(t) <= 2 for t in by_key.values())
    assert any(len(t) == 2 for t in by_key.values())  # 20 tuples per key: the load is split


def test_custom_grouping_decides(all_groupings):
    rows, packing = _run(all_groupings, "record_custom")
    targets = packing.tasks_of("record_custom")
    for r in rows:
        assert r["task"] == (targets[0] if r["values"][0] % 2 == 0 else targets[-1])


def test_direct_emit_reaches_the_chosen_task_and_named_streams_stay_apart(all_groupings):
    rows, packing = _run(all_groupings, "tens_bolt")
    targets = packing.tasks_of("tens_bolt")
    assert sorted(r["values"][0] for r in rows) == list(range(0, COUNT, 10))
    for r in rows:
        assert r["stream"] == "tens"
        assert r["task"] == targets[(r["values"][0] // 10) % len(targets)]
