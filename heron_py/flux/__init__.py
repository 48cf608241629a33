"""Storm Flux YAML topologies: ``heron-py submit CLUSTER topology.yaml [--filter f.properties]``.

``load_flux`` reads a Flux file (Storm's flux-core format: name, config, components, spouts,
bolts, streams, includes, ``${...}`` substitution) into the same TopologyDef a heronpy file
builds. Storm's Java classes cannot run here; the ones Storm's own examples use have Python
versions (heron_py.flux.builtins, shell components via heron_py.api.shell).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

FLUX_SUFFIXES = (".yaml", ".yml")

if TYPE_CHECKING:
    from heron_py.flux.errors import FluxError
    from heron_py.flux.loader import load_flux

__all__ = ["FLUX_SUFFIXES", "FluxError", "load_flux"]


def __getattr__(name: str) -> Any:
    # imported when first asked for: the loader brings the Python versions of Storm's classes
    # (Kafka, Redis, JDBC...), which a submit of a .py file never needs (0.05 s of every submit)
    if name == "load_flux":
        from heron_py.flux.loader import load_flux

        return load_flux
    if name == "FluxError":
        from heron_py.flux.errors import FluxError

        return FluxError
    raise AttributeError(f"module 'heron_py.flux' has no attribute {name!r}")
