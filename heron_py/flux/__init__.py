"""Storm Flux YAML topologies: ``heron-py submit CLUSTER topology.yaml [--filter f.properties]``.

``load_flux`` reads a Flux file (Storm's flux-core format: name, config, components, spouts,
bolts, streams, includes, ``${...}`` substitution) into the same TopologyDef a heronpy file
builds. Storm's Java classes cannot run here; the ones Storm's own examples use have Python
versions (heron_py.flux.builtins, shell components via heron_py.api.shell).
"""

from heron_py.flux.errors import FluxError
from heron_py.flux.loader import load_flux

FLUX_SUFFIXES = (".yaml", ".yml")

__all__ = ["FLUX_SUFFIXES", "FluxError", "load_flux"]
