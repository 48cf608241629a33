"""Key groups: how a keyed component's keys map to its tasks, so that its state can follow its
keys when its parallelism changes (Flink's max-parallelism key groups).

Each key hashes (``heron_py.common.stable_hash``, the fields grouping's hash) to one of
``max_parallelism`` groups, and the task at index i of the component's sorted tasks owns the
contiguous groups ``[ceil(i*M/n), ceil((i+1)*M/n))``. The group of a key never changes, so a
rescale moves whole groups between tasks: a restore gives each new task exactly the state of
the groups it now owns, and the fields grouping sends it exactly their keys. ``M`` must stay the
same for the component's life: ``heron-py update`` writes it into the component's config before
the first rescale (``topology.component.max.parallelism``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from heron_py.common.config import MAX_PARALLELISM
from heron_py.common.stable_hash import value_hash

DEFAULT_MAX_PARALLELISM = 128
UPPER_MAX_PARALLELISM = 32768


def default_max_parallelism(parallelism: int) -> int:
    """Flink's rule: 1.5x the parallelism rounded up to a power of two, at least 128, at most
    32768 (never below the parallelism itself)."""
    wanted = parallelism + parallelism // 2
    pow2 = 1 << max(0, wanted - 1).bit_length()
    return max(parallelism, min(max(pow2, DEFAULT_MAX_PARALLELISM), UPPER_MAX_PARALLELISM))


def max_parallelism(topology_config: Mapping[str, Any], component_config: Mapping[str, Any],
                    parallelism: int) -> int:
    """The component's number of key groups: its configured ``topology.component.max.parallelism``
    (its own config over the topology's), else the default for its parallelism."""
    configured = MAX_PARALLELISM.parse({**topology_config, **component_config})
    return int(configured) if configured is not None else default_max_parallelism(parallelism)


def key_group(key: Any, max_par: int) -> int:
    """The key's group. A state key is the grouping's value for one field, a tuple of the values
    for several: ``value_hash`` of either equals the fields grouping's hash."""
    return value_hash(key) % max_par


def owner_index(group: int, parallelism: int, max_par: int) -> int:
    """The index (into the component's sorted tasks) of the task that owns ``group``."""
    return group * parallelism // max_par


def owned_groups(index: int, parallelism: int, max_par: int) -> range:
    """The groups the task at ``index`` owns: exactly those whose ``owner_index`` is ``index``."""
    return range((index * max_par + parallelism - 1) // parallelism,
                 ((index + 1) * max_par + parallelism - 1) // parallelism)
