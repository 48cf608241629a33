"""Config keys and values, as heronpy's api_constants (the key strings are Heron's)."""

import enum

TOPOLOGY_DEBUG = "topology.debug"
TOPOLOGY_STMGRS = "topology.stmgrs"
TOPOLOGY_MESSAGE_TIMEOUT_SECS = "topology.message.timeout.secs"
TOPOLOGY_COMPONENT_PARALLELISM = "topology.component.parallelism"
TOPOLOGY_MAX_SPOUT_PENDING = "topology.max.spout.pending"
TOPOLOGY_AUTO_TASK_HOOKS = "topology.auto.task.hooks"
TOPOLOGY_SERIALIZER_CLASSNAME = "topology.serializer.classname"
TOPOLOGY_TICK_TUPLE_FREQ_SECS = "topology.tick.tuple.freq.secs"
TOPOLOGY_ENABLE_MESSAGE_TIMEOUTS = "topology.enable.message.timeouts"
TOPOLOGY_RELIABILITY_MODE = "topology.reliability.mode"
TOPOLOGY_CONTAINER_CPU_REQUESTED = "topology.container.cpu"
TOPOLOGY_CONTAINER_RAM_REQUESTED = "topology.container.ram"
TOPOLOGY_CONTAINER_DISK_REQUESTED = "topology.container.disk"
TOPOLOGY_CONTAINER_MAX_CPU_HINT = "topology.container.max.cpu.hint"
TOPOLOGY_CONTAINER_MAX_RAM_HINT = "topology.container.max.ram.hint"
TOPOLOGY_CONTAINER_MAX_DISK_HINT = "topology.container.max.disk.hint"
TOPOLOGY_CONTAINER_PADDING_PERCENTAGE = "topology.container.padding.percentage"
TOPOLOGY_COMPONENT_RAMMAP = "topology.component.rammap"
TOPOLOGY_STATEFUL_START_CLEAN = "topology.stateful.start.clean"
TOPOLOGY_STATEFUL_CHECKPOINT_INTERVAL_SECONDS = "topology.stateful.checkpoint.interval.seconds"
TOPOLOGY_NAME = "topology.name"
TOPOLOGY_TEAM_NAME = "topology.team.name"
TOPOLOGY_TEAM_EMAIL = "topology.team.email"
TOPOLOGY_CAP_TICKET = "topology.cap.ticket"
TOPOLOGY_PROJECT_NAME = "topology.project.name"
TOPOLOGY_ENVIRONMENT = "topology.environment"
TOPOLOGY_WORKER_CHILDOPTS = "topology.worker.childopts"
TOPOLOGY_COMPONENT_JVMOPTS = "topology.component.jvmopts"
TOPOLOGY_CONTAINER_RAM_PADDING = "topology.container.ram.padding"
TOPOLOGY_ADDITIONAL_CLASSPATH = "topology.additional.classpath"
TOPOLOGY_COMPONENT_OUTPUT_TPS = "topology.component.output.tps"
# Heron's (Java API) boolean alias for the at-least-once mode; not in heronpy
TOPOLOGY_ACKING = "topology.acking"
TOPOLOGY_ENABLE_ACKING = TOPOLOGY_ACKING


class TopologyReliabilityMode(str, enum.Enum):
    # heronpy's were plain str class attributes; a str enum compares equal to those strings
    # and is stored in the config as its value
    ATMOST_ONCE = "ATMOST_ONCE"
    ATLEAST_ONCE = "ATLEAST_ONCE"
    EFFECTIVELY_ONCE = "EFFECTIVELY_ONCE"

    def __str__(self) -> str:
        return self.value
