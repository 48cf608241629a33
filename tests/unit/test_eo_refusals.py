"""Effectively once refuses what would lose state (issue 37, hole 1): droptuples mode drops
tuples by design."""

from __future__ import annotations

import pytest

from heron_py.common.config import ConfigError, check_topology_config


def test_droptuples_with_effectively_once_is_refused_at_submit() -> None:
    with pytest.raises(ConfigError) as e:
        check_topology_config({"topology.reliability.mode": "EFFECTIVELY_ONCE",
                               "topology.droptuples.upon.backpressure": "true"}, {})
    assert str(e.value) == ("config topology.droptuples.upon.backpressure: EFFECTIVELY_ONCE never drops tuples (a "
                            "drop would be lost state); expected false, found true")
    check_topology_config({"topology.reliability.mode": "ATLEAST_ONCE",
                           "topology.droptuples.upon.backpressure": "true"}, {})
