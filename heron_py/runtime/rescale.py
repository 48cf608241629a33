"""How a component's checkpointed state is split when its parallelism changed since the
checkpoint (``heron-py update``): which rule applies, and each rule's split, pure.

- Same number of tasks (its tasks' ids may have moved with another component's change): the
  task at index i of the sorted tasks takes what index i saved, whatever the rule.
- ``keyed`` (``topology.component.state.rescale: auto`` and every input fields grouped): each key
  of the state belongs to its key group (``heron_py.planner.keygroups``); a task takes the
  entries of the groups it now owns, from every old task that owned some of them. Right when
  the state is keyed by the grouping's values (a word count's ``state[word]``), as Flink's keyed
  state always is.
- ``merge`` (declared): every new task takes every old task's entries, a mapping value merged
  key by key (a spout's positions per partition or per file: each task keeps what it reads);
  two old tasks holding one key (or one inner key) with different values cannot be merged.
- otherwise the state cannot be split: ``heron-py update`` refuses, naming the key to set.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from typing import Any

from heron_py.common.config import STATE_RESCALE
from heron_py.planner.keygroups import key_group, owned_groups, owner_index
from heron_py.planner.model import GroupingKind, TopologyDef


class Rule(enum.Enum):
    KEYED = "keyed"
    MERGE = "merge"
    NONE = "none"  # not splittable: a rescale is refused


class StateSplitError(Exception):
    pass


UNSPLITTABLE = ("its state cannot be split: its inputs are not all fields grouped and its "
                "topology.component.state.rescale is not merge")


def _declared(topology: TopologyDef, component: str) -> str:
    """The component's ``topology.component.state.rescale`` (its own config over the topology's)."""
    return str(STATE_RESCALE.parse({**topology.config, **topology.component(component).config}))


def rule_of(topology: TopologyDef, component: str) -> Rule:
    chosen = _declared(topology, component)
    if chosen == "merge":
        return Rule.MERGE
    if chosen == "refuse":
        return Rule.NONE
    inputs = topology.component(component).inputs
    fields = bool(inputs) and all(i.grouping.kind is GroupingKind.FIELDS for i in inputs)
    return Rule.KEYED if fields else Rule.NONE


def refusal(topology: TopologyDef, component: str, old: int, new: int) -> str | None:
    """Why ``component``'s state cannot go from ``old`` to ``new`` tasks (None: it can). More
    tasks than key groups is not asked here: ``validate`` refuses that for every component,
    before the state is looked at."""
    if old == new or rule_of(topology, component) is not Rule.NONE:
        return None
    why = ("its topology.component.state.rescale is refuse" if _declared(topology, component) == "refuse"
           else "its inputs are not all fields grouped, so its state is not known to be keyed")
    return (f"component '{component}' keeps checkpointed state that cannot be split from {old} to {new} "
            f"tasks: {why}; expected a component whose every input is fields grouped, or "
            f"topology.component.state.rescale: merge in its config (every new task gets every old task's "
            f"entries)")


def sources(rule: Rule, index: int, old_n: int, new_n: int, max_par: int) -> list[int]:
    """The indices of the old tasks whose saved state the new task at ``index`` needs."""
    if old_n == new_n:
        return [index]
    if rule is Rule.MERGE:
        return list(range(old_n))
    if rule is Rule.KEYED:
        mine = owned_groups(index, new_n, max_par)
        if not mine:
            return []
        return list(range(owner_index(mine[0], old_n, max_par), owner_index(mine[-1], old_n, max_par) + 1))
    raise StateSplitError(UNSPLITTABLE)


def split(rule: Rule, saved: Sequence[tuple[int, Mapping[Any, Any]]], index: int, old_n: int, new_n: int,
          max_par: int, component: str) -> dict[Any, Any]:
    """The state of the new task at ``index`` of ``new_n``, from ``saved``: (old task id, its
    entries) of the old tasks ``sources`` named (those that saved state)."""
    if old_n == new_n:
        return dict(saved[0][1]) if saved else {}
    if rule is Rule.KEYED:
        mine = owned_groups(index, new_n, max_par)
        out: dict[Any, Any] = {}
        held: dict[Any, int] = {}
        for task, entries in saved:
            for k, v in entries.items():
                if key_group(k, max_par) in mine:
                    if k in out and out[k] != v:
                        # not keyed by the grouping after all: one of the two would be lost
                        raise StateSplitError(_conflict(component, repr(k), held[k], task))
                    out[k], held[k] = v, task
        return out
    if rule is Rule.MERGE:
        return _merge(saved, component)
    raise StateSplitError(UNSPLITTABLE)


def _merge(saved: Sequence[tuple[int, Mapping[Any, Any]]], component: str) -> dict[Any, Any]:
    out: dict[Any, Any] = {}
    held: dict[Any, int] = {}  # key -> the old task its value came from
    for task, entries in saved:
        for k, v in entries.items():
            if k not in out:
                out[k], held[k] = (dict(v) if isinstance(v, Mapping) else v), task
            elif isinstance(out[k], dict) and isinstance(v, Mapping):
                for ik, iv in v.items():
                    if ik in out[k] and out[k][ik] != iv:
                        raise StateSplitError(_conflict(component, f"{k!r}[{ik!r}]", held[k], task))
                    out[k][ik] = iv
            elif out[k] != v:
                raise StateSplitError(_conflict(component, repr(k), held[k], task))
    return out


def _conflict(component: str, key: str, first: int, second: int) -> str:
    return (f"component '{component}': state key {key} has different values in old tasks {first} and {second}: "
            f"expected each key (each inner key of a mapping) in one old task's state to merge them, found two")
