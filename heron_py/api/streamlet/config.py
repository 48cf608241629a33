"""heronpy's streamlet Config: delivery semantics, containers, resources, user keys."""

from __future__ import annotations

import enum
from typing import Any

from heron_py.api import api_constants
from heron_py.api.streamlet.errors import StreamletError
from heron_py.api.streamlet.resources import Resources
from heron_py.common.config import STREAMLET_FUSION

# heron-py's: run the stateless operators between two repartitions in one task (graph.fuse);
# on unless the program's Config sets it false
FUSION = STREAMLET_FUSION.name


class DeliverySemantics(enum.IntEnum):
    # heronpy's Config.ATMOST_ONCE etc. were the ints 1, 2, 3; an IntEnum still equals them
    ATMOST_ONCE = 1
    ATLEAST_ONCE = 2
    EFFECTIVELY_ONCE = 3


_MODES = {
    DeliverySemantics.ATMOST_ONCE: api_constants.TopologyReliabilityMode.ATMOST_ONCE,
    DeliverySemantics.ATLEAST_ONCE: api_constants.TopologyReliabilityMode.ATLEAST_ONCE,
    # mapped as heronpy does; heron-py's submit then refuses it until effectively once exists
    DeliverySemantics.EFFECTIVELY_ONCE: api_constants.TopologyReliabilityMode.EFFECTIVELY_ONCE,
}


class Config:
    """The topology config a Runner submits (``_api_config``, heronpy's attribute)."""

    ATMOST_ONCE = DeliverySemantics.ATMOST_ONCE
    ATLEAST_ONCE = DeliverySemantics.ATLEAST_ONCE
    EFFECTIVELY_ONCE = DeliverySemantics.EFFECTIVELY_ONCE

    def __init__(self, config: dict[str, Any] | None = None) -> None:
        if config is not None and not isinstance(config, dict):
            raise StreamletError(f"Config: the initial config must be a dict, found {type(config).__name__}")
        self._api_config: dict[str, Any] = dict(config) if config is not None else {}

    def set_delivery_semantics(self, semantics: Any) -> None:
        if isinstance(semantics, bool) or semantics not in _MODES:
            raise StreamletError(f"Config.set_delivery_semantics: expected Config.ATMOST_ONCE, ATLEAST_ONCE or "
                                 f"EFFECTIVELY_ONCE, found {semantics!r}")
        self._api_config[api_constants.TOPOLOGY_RELIABILITY_MODE] = _MODES[DeliverySemantics(semantics)]

    def set_num_containers(self, ncontainers: Any) -> None:
        n = int(ncontainers)
        if n < 1:
            raise StreamletError(f"Config.set_num_containers: expected at least 1 container, found {ncontainers!r}")
        self._api_config[api_constants.TOPOLOGY_STMGRS] = n

    def set_container_resources(self, resources: Resources) -> None:
        if not isinstance(resources, Resources):
            raise StreamletError(f"Config.set_container_resources: expected a Resources, "
                                 f"found {type(resources).__name__}")
        self._api_config[api_constants.TOPOLOGY_CONTAINER_CPU_REQUESTED] = resources.get_cpu()
        self._api_config[api_constants.TOPOLOGY_CONTAINER_RAM_REQUESTED] = resources.get_ram()

    def set_fusion(self, fusion: Any) -> None:
        """heron-py's addition. With True (the default), consecutive map, flat_map, filter,
        consume, log and to_sink streamlets of one parallelism, each the only reader of the one
        before, run in one task (one component named "a__b__c"), per batch, without a hop
        between them. False keeps a component per streamlet, named as heronpy names them."""
        if not isinstance(fusion, bool):
            raise StreamletError(f"Config.set_fusion: expected True or False, found {fusion!r}")
        self._api_config[FUSION] = fusion

    def set_user_config(self, key: str, value: Any) -> None:
        self._api_config[key] = value

    def get_config(self) -> dict[str, Any]:
        """heron-py's addition: a copy of the topology config built so far."""
        return dict(self._api_config)
