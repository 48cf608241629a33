"""Optional dependencies a component needs (confluent_kafka for the Kafka connectors, ...).

A component's class declares them, by the module prefix of its class here (``declare``), so a
topology that uses one without it installed is refused at submit with one line saying what to
install, instead of a task failing to import it at run time."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass

from heron_py.planner.errors import TopologyError
from heron_py.planner.model import TopologyDef


@dataclass(frozen=True)
class Requirement:
    module: str  # the module that must be importable
    install: str  # what to install, e.g. heron-py[kafka]


# "package.prefix." of a component's class → what it needs
_BY_PREFIX: dict[str, Requirement] = {
    "heron_py.connectors.kafka.": Requirement("confluent_kafka", "heron-py[kafka]"),
}


def declare(class_prefix: str, module: str, install: str) -> None:
    """Connectors register theirs here (issue 38's Redis, RabbitMQ, PostgreSQL connectors)."""
    _BY_PREFIX[class_prefix] = Requirement(module, install)


def importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def check_requirements(topology: TopologyDef) -> None:
    """TopologyError for the first component whose requirement is not importable."""
    for c in topology.components:
        module = c.class_name.split(":", 1)[0] + "."
        for prefix, req in _BY_PREFIX.items():
            if module.startswith(prefix) and not importable(req.module):
                raise TopologyError(f"topology '{topology.name}': {c.kind.value} '{c.name}' ({c.class_name}) needs "
                                    f"the Python module '{req.module}', which is not installed: "
                                    f"pip install '{req.install}'")
