"""heronpy's Runner: compiles a Builder's streamlets into a topology and submits it the way
``TopologyBuilder.build_and_submit()`` does (so ``heron-py submit`` runs Streamlet programs)."""

from __future__ import annotations

from typing import Any

from heron_py.api import submit_hook
from heron_py.api.streamlet.builder import Builder
from heron_py.api.streamlet.config import Config
from heron_py.api.streamlet.errors import StreamletError
from heron_py.api.topology import TopologyBuilder
from heron_py.common.config import STREAMLET_FUSION, ConfigError
from heron_py.planner.model import TopologyDef


def build_topology(name: Any, config: Any, builder: Any) -> TopologyDef:
    """heron-py's addition: the topology Runner.run would submit (for tests and dry runs)."""
    if not isinstance(name, str):
        raise StreamletError(f"Runner.run: the topology name must be a str, found {name!r}")
    if not isinstance(config, Config):
        raise StreamletError(f"Runner.run: config must be a heronpy.streamlet.config.Config, "
                             f"found {type(config).__name__}")
    if not isinstance(builder, Builder):
        raise StreamletError(f"Runner.run: builder must be a heronpy.streamlet.builder.Builder, "
                             f"found {type(builder).__name__}")
    bldr = TopologyBuilder(name=name)
    try:  # a bool, or "true"/"false" as heronpy's sanitized configs and config files hold it
        fusion = bool(STREAMLET_FUSION.parse(config._api_config))
    except ConfigError as e:
        raise StreamletError(f"Runner.run: {e}") from None
    builder.build(bldr, fusion=fusion)
    bldr.set_config(config._api_config)
    return bldr.build()


class Runner:
    def run(self, name: str, config: Config, builder: Builder) -> None:
        submit_hook.submit(build_topology(name, config, builder))
