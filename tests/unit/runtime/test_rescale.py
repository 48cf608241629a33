"""Splitting a component's checkpointed state over a new parallelism (heron_py/runtime/rescale.py)."""

from __future__ import annotations

import dataclasses

import pytest

from heron_py.api.bolt.bolt import Bolt
from heron_py.api.bolt.window_bolt import SlidingWindowBolt
from heron_py.api.spout.spout import Spout
from heron_py.api.stream import Grouping
from heron_py.api.topology import TopologyBuilder
from heron_py.connectors.committing import CommittingSink
from heron_py.planner.errors import TopologyError
from heron_py.planner.keygroups import key_group, owner_index
from heron_py.planner.logical import validate
from heron_py.planner.model import TopologyDef
from heron_py.runtime.rescale import Rule, StateSplitError, refusal, rule_of, sources, split


class S(Spout):
    outputs = ["w"]


class B(Bolt):
    outputs = ["w"]


def _topo(count_config: dict | None = None, spout_config: dict | None = None) -> TopologyDef:
    b = TopologyBuilder("wc")
    s = b.add_spout("words", S, par=2, config=spout_config or {})
    sp = b.add_bolt("split", B, par=2, inputs={s: Grouping.SHUFFLE})
    b.add_bolt("count", B, par=2, inputs={sp: Grouping.fields("w")}, config=count_config or {})
    return b.build()


def test_the_rule_follows_the_inputs_and_the_key() -> None:
    t = _topo()
    assert rule_of(t, "count") is Rule.KEYED
    assert rule_of(t, "split") is Rule.NONE
    assert rule_of(t, "words") is Rule.NONE
    assert rule_of(_topo(spout_config={"topology.component.state.rescale": "merge"}), "words") is Rule.MERGE
    assert rule_of(_topo(count_config={"topology.component.state.rescale": "refuse"}), "count") is Rule.NONE


def test_refusals_are_one_line_each() -> None:
    t = _topo()
    assert refusal(t, "count", 2, 5) is None
    assert refusal(t, "split", 2, 2) is None  # same parallelism: moved by position
    assert refusal(t, "split", 2, 3) == (
        "component 'split' keeps checkpointed state that cannot be split from 2 to 3 tasks: its inputs are not all "
        "fields grouped, so its state is not known to be keyed; expected a component whose every input is fields "
        "grouped, or topology.component.state.rescale: merge in its config (every new task gets every old task's "
        "entries)")
    refused = _topo(count_config={"topology.component.state.rescale": "refuse"})
    assert refusal(refused, "count", 2, 3) == (
        "component 'count' keeps checkpointed state that cannot be split from 2 to 3 tasks: its "
        "topology.component.state.rescale is refuse; expected a component whose every input is fields grouped, or "
        "topology.component.state.rescale: merge in its config (every new task gets every old task's entries)")
    small = _topo(count_config={"topology.component.max.parallelism": 4})
    assert refusal(small, "count", 2, 4) is None
    # more tasks than key groups: validate refuses it for any component, before the state is read
    validate(_resized(small, "count", 4))
    with pytest.raises(TopologyError) as e:
        validate(_resized(small, "count", 5))
    assert str(e.value) == ("topology 'wc': bolt 'count' has parallelism 5; expected at most its "
                            "topology.component.max.parallelism (4), its number of key groups")


def _resized(topo: TopologyDef, component: str, n: int) -> TopologyDef:
    return dataclasses.replace(topo, components=tuple(
        dataclasses.replace(c, par=n) if c.name == component else c for c in topo.components))


@pytest.mark.parametrize(("old", "new"), [(2, 3), (3, 2), (1, 4), (4, 1), (3, 5), (5, 3), (2, 2)])
def test_keyed_state_lands_where_the_grouping_sends_its_keys(old: int, new: int) -> None:
    m = 16
    keys = [f"w{i}" for i in range(300)]
    saved = {i: {k: len(k) + j for j, k in enumerate(keys) if owner_index(key_group(k, m), old, m) == i}
             for i in range(old)}
    union: dict[str, int] = {}
    for i in range(new):
        need = sources(Rule.KEYED, i, old, new, m)
        got = split(Rule.KEYED, [(100 + j, saved[j]) for j in need], i, old, new, m, "count")
        assert all(owner_index(key_group(k, m), new, m) == i for k in got)
        # the old tasks it did not read held none of its keys
        others = [j for j in range(old) if j not in need]
        assert not any(owner_index(key_group(k, m), new, m) == i for j in others for k in saved[j])
        assert not set(got) & set(union)
        union.update(got)
    assert union == {k: v for part in saved.values() for k, v in part.items()}


def test_merge_joins_mappings_and_refuses_a_conflict() -> None:
    a = {"positions": {("t", 0): 5}, "mode": "x"}
    b = {"positions": {("t", 1): 9}, "mode": "x"}
    assert sources(Rule.MERGE, 0, 2, 3, 8) == [0, 1]
    assert split(Rule.MERGE, [(3, a), (4, b)], 0, 2, 3, 8, "words") == {
        "positions": {("t", 0): 5, ("t", 1): 9}, "mode": "x"}
    assert a == {"positions": {("t", 0): 5}, "mode": "x"}  # the saved mappings are not changed
    with pytest.raises(StateSplitError) as e:
        split(Rule.MERGE, [(3, a), (4, {"positions": {("t", 0): 6}})], 0, 2, 3, 8, "words")
    assert str(e.value) == ("component 'words': state key 'positions'[('t', 0)] has different values in old tasks 3 "
                            "and 4: expected each key (each inner key of a mapping) in one old task's state to merge "
                            "them, found two")
    with pytest.raises(StateSplitError) as e:
        split(Rule.MERGE, [(3, {"n": 1}), (4, {"n": 2})], 0, 2, 3, 8, "words")
    assert str(e.value).startswith("component 'words': state key 'n' has different values in old tasks 3 and 4")


def test_an_unsplittable_state_says_why() -> None:
    with pytest.raises(StateSplitError) as e:
        sources(Rule.NONE, 0, 2, 3, 8)
    assert str(e.value) == ("its state cannot be split: its inputs are not all fields grouped and its "
                            "topology.component.state.rescale is not merge")
    assert sources(Rule.NONE, 1, 2, 2, 8) == [1]  # same parallelism: by position, any rule
    assert split(Rule.NONE, [(7, {"n": 1})], 1, 2, 2, 8, "split") == {"n": 1}
    assert split(Rule.NONE, [], 1, 2, 2, 8, "split") == {}  # that task saved nothing


def test_a_key_held_by_two_old_tasks_is_no_keyed_state_and_fails_the_split() -> None:
    """A state keyed by something other than the grouping's values (one fixed key in every task)
    would lose all but one task's value: refused instead."""
    with pytest.raises(StateSplitError) as e:
        split(Rule.KEYED, [(3, {"tuples": [1]}), (4, {"tuples": [2]})], 0, 2, 1, 8, "window")
    assert str(e.value) == ("component 'window': state key 'tuples' has different values in old tasks 3 and 4: "
                            "expected each key (each inner key of a mapping) in one old task's state to merge them, "
                            "found two")


class Window(SlidingWindowBolt):
    outputs = ["n"]

    def processWindow(self, window_info, tuples):
        pass


class Sink(CommittingSink, B):
    pass


def test_classes_whose_state_cannot_be_split_say_so_in_their_components_config() -> None:
    b = TopologyBuilder("wc")
    s = b.add_spout("words", S, par=2)
    b.add_bolt("window", Window, par=2, inputs={s: Grouping.fields("w")})
    b.add_bolt("sink", Sink, par=2, inputs={s: Grouping.fields("w")},
               config={"topology.component.state.rescale": "merge"})
    t = b.build()
    assert rule_of(t, "window") is Rule.NONE
    assert refusal(t, "window", 2, 3) is not None and "its topology.component.state.rescale is refuse" in str(
        refusal(t, "window", 2, 3))
    assert rule_of(t, "sink") is Rule.MERGE  # the component's own config wins over its class


def test_a_new_task_reads_only_the_old_tasks_that_owned_its_groups() -> None:
    # 16 groups; new index 2 of 3 owns groups 11..15, which old index 1 of 2 owned (8..15)
    assert sources(Rule.KEYED, 2, 2, 3, 16) == [1]
    assert sources(Rule.KEYED, 0, 3, 2, 16) == [0, 1]  # groups 0..7: old 0 (0..5) and old 1 (6..10)
    with pytest.raises(StateSplitError) as e:
        split(Rule.NONE, [(7, {"n": 1})], 0, 2, 3, 16, "split")
    assert str(e.value) == ("its state cannot be split: its inputs are not all fields grouped and its "
                            "topology.component.state.rescale is not merge")


def test_merge_refuses_a_mapping_in_one_old_task_and_a_plain_value_in_another() -> None:
    for first, second in (({"k": {"a": 1}}, {"k": 5}), ({"k": 5}, {"k": {"a": 1}})):
        with pytest.raises(StateSplitError) as e:
            split(Rule.MERGE, [(3, first), (4, second)], 0, 2, 3, 8, "words")
        assert str(e.value).startswith("component 'words': state key 'k' has different values in old tasks 3 and 4")


def test_the_kafka_and_file_spouts_positions_merge_and_each_new_task_starts_where_its_owner_left_off() -> None:
    """Flink's union redistribution: every new task gets every old task's positions (each saved
    by the one task that had the partition or file), and takes those it is assigned now."""
    from heron_py.api.topology import TopologyBuilder
    from heron_py.connectors.files.spout import FileTailSpout
    from heron_py.connectors.kafka.delivery import POSITIONS_KEY, positions_from_state, positions_to_state
    from heron_py.connectors.kafka.spout import KafkaSpout
    from heron_py.runtime.rescale import Rule, refusal, rule_of, split

    b = TopologyBuilder("t")
    b.add_spout("kafka", KafkaSpout, par=2, config={"kafka.bootstrap.servers": "127.0.0.1:9", "kafka.topics": "in"})
    b.add_spout("files", FileTailSpout, par=2, config={"files.folder": "/tmp/in"})
    topo = b.build()
    assert rule_of(topo, "kafka") is Rule.MERGE and rule_of(topo, "files") is Rule.MERGE
    assert refusal(topo, "kafka", 2, 3) is None and refusal(topo, "files", 2, 1) is None
    old = [(1, {POSITIONS_KEY: positions_to_state({("in", 0): 40, ("in", 2): 7})}),
           (2, {POSITIONS_KEY: positions_to_state({("in", 1): 12})})]
    for index in range(3):
        merged = split(Rule.MERGE, old, index, 2, 3, 128, "kafka")
        assert positions_from_state(merged[POSITIONS_KEY]) == {("in", 0): 40, ("in", 1): 12, ("in", 2): 7}
    files = [(3, {"positions": {"a.log": (10, 300)}}), (4, {"positions": {"b.log": (2, 40), "c.log": (0, 0)}})]
    assert split(Rule.MERGE, files, 0, 2, 1, 128, "files") == {
        "positions": {"a.log": (10, 300), "b.log": (2, 40), "c.log": (0, 0)}}
