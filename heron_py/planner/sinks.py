"""Which sinks write exactly once under EFFECTIVELY_ONCE, and the refusal of those that do not.

Effectively once rolls every task back to the last complete checkpoint after a failure, and the
spouts replay what followed it. A sink that wrote those inputs already writes them again: its
system holds duplicates (and, if it wrote a batch it then failed, holes). heron-py's own sinks
that commit with the checkpoint (heron_py/connectors/committing.py) are exact; the ones listed
here write when an input comes, and a topology that uses one under EFFECTIVELY_ONCE is refused
at submit with one line, unless the operator accepts duplicates in that sink's system with
``heron_py.sink.at.least.once.ok: true`` (on the topology or the component).

Found by a component's class, or by a Streamlet sink object pickled in its config (read from
the pickle's opcodes: nothing is unpickled or imported)."""

from __future__ import annotations

from heron_py.planner.errors import TopologyError
from heron_py.planner.model import TopologyDef
from heron_py.planner.requirements import config_objects

AT_LEAST_ONCE_OK = "heron_py.sink.at.least.once.ok"

# "module:qualname" of a sink that writes when an input comes → what is exact instead
_NOT_EXACT: dict[str, str] = {
    "heron_py.connectors.kafka.bolt:KafkaBolt": "Kafka has no commit heron-py can tie to a checkpoint here",
    "heron_py.connectors.kafka.streamlet:KafkaSink": "Kafka has no commit heron-py can tie to a checkpoint here",
    "heron_py.connectors.rabbitmq.bolt:RabbitMQBolt": "a publish to RabbitMQ cannot be taken back or deduplicated",
    "heron_py.connectors.rabbitmq.streamlet:RabbitMQSink": "a publish to RabbitMQ cannot be taken back or "
                                                           "deduplicated",
    "heron_py.connectors.redis.streamlet:RedisStreamSink": "its XADDs are written as elements come",
    "heron_py.connectors.postgres.streamlet:PostgresSink": "it inserts each element as it comes",
}
EXACT = ("PostgresInsertBolt", "RedisStreamBolt", "RedisStoreBolt", "FileSink")


def _accepted(value: object) -> bool:
    return value is True or (isinstance(value, str) and value.strip().lower() == "true")


def check_exact_sinks(topology: TopologyDef) -> None:
    """TopologyError for the first sink that cannot write exactly once, under EFFECTIVELY_ONCE."""
    from heron_py.common.config import effectively_once

    if not effectively_once(topology.config):
        return
    for c in topology.components:
        if _accepted({**topology.config, **c.config}.get(AT_LEAST_ONCE_OK)):
            continue
        for used in (c.class_name, *(f"{m}:{a}" for m, a in config_objects(c.config))):
            why = _NOT_EXACT.get(used)
            if why is not None:
                raise TopologyError(
                    f"topology '{topology.name}': {c.kind.value} '{c.name}' ({used}) does not write exactly once "
                    f"under EFFECTIVELY_ONCE ({why}): a replay after a failure writes again what it wrote; "
                    f"expected a sink that commits with the checkpoints ({', '.join(EXACT)}), or "
                    f"topology.reliability.mode ATLEAST_ONCE with consumers that drop duplicates, or "
                    f"{AT_LEAST_ONCE_OK}: true to accept duplicates in that sink's system")
