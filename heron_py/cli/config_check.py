"""Warnings about a topology's config keys at submit (pure).

A misspelt engine key (``topology.mesage.timeout.secs``) is otherwise silently ignored and
the default applies, so each key in an engine namespace that heron-py does not read is one
warning with the likely key (difflib). Storm and Heron keys that heron-py accepts for
compatibility but does not act on (``topology.worker.childopts``, ``topology.container.ram``)
are listed in one warning, so a user porting a topology knows which settings have no effect.
Keys outside the engine's namespaces are the user's own (components read them) and pass.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from typing import Any

from heron_py.common.config import KEYS
from heron_py.common.package import MAX_BYTES, WARN_BYTES
from heron_py.planner.model import TopologyDef

# engine namespaces: a key under one of these is meant for heron-py, Heron or Storm
ENGINE_PREFIXES = ("topology.", "heron.", "heron_py.", "storm.", "nimbus.", "supervisor.", "worker.", "drpc.",
                   "pystorm.")

# keys heron-py reads outside the config table (heron_py/common/config.py KEYS), or writes itself
READ_ELSEWHERE = frozenset({
    MAX_BYTES.name, WARN_BYTES.name,
    "topology.name", "topology.workers", "topology.acker.executors", "topology.debug", "topology.secret",
    "topology.component.parallelism", "topology.auto.task.hooks", "topology.enable.message.timeouts",
    "topology.subprocess.timeout.secs", "topology.shellbolt.max.pending", "supervisor.worker.timeout.secs",
})
# families of keys read by prefix (windows, shell components, sinks, connectors, pystorm)
READ_PREFIXES = ("heron_py.window.", "heron_py.shell.", "heron_py.sink.", "heron_py.connectors.", "heron_py.pystorm.",
                 "heron_py.testing.")

# Storm's and Heron's keys that a ported topology sets and heron-py accepts without acting on
ACCEPTED_UNUSED = frozenset({
    "topology.worker.childopts", "topology.worker.max.heap.size.mb", "topology.worker.shared.thread.pool.size",
    "topology.kryo.register", "topology.kryo.decorators", "topology.kryo.factory",
    "topology.fall.back.on.java.serialization", "topology.skip.missing.kryo.registrations",
    "topology.max.task.parallelism", "topology.eventlogger.executors",
    # (topology.state.provider and its config are read: heron_py/common/config.py, checkpoint storage)
    "topology.executor.receive.buffer.size", "topology.executor.send.buffer.size",
    "topology.transfer.buffer.size", "topology.builtin.metrics.bucket.size.secs",
    "topology.environment", "topology.classpath", "topology.additional.classpath", "topology.priority",
    "topology.scheduler.strategy", "topology.component.resources.onheap.memory.mb",
    "topology.component.resources.offheap.memory.mb", "topology.component.cpu.pcore.percent",
    "topology.multilang.serializer", "topology.testing.always.try.serialize",
    "topology.trident.batch.emit.interval.millis", "topology.sleep.spout.wait.strategy.time.ms",
    "topology.spout.wait.strategy", "topology.error.throttle.interval.secs",
    "topology.max.error.report.per.interval", "topology.tasks", "topology.users", "topology.groups",
    "topology.submitter.user", "topology.submitter.principal",
    # Heron's (heronpy's Config setters)
    "topology.container.cpu", "topology.container.ram", "topology.container.disk",
    "topology.container.max.cpu.hint", "topology.container.max.ram.hint", "topology.container.max.disk.hint",
    "topology.container.padding.percentage", "topology.container.ram.padding", "topology.container.cpu.padding",
    "topology.component.rammap", "topology.component.cpumap", "topology.component.diskmap",
    "topology.component.jvmopts", "topology.component.output.tps", "topology.jvmopts",
    "topology.team.name", "topology.team.email", "topology.cap.ticket", "topology.project.name",
    "topology.update.deactivate.wait.secs", "topology.update.reactivate.wait.secs",
    "topology.exactlyonce.enabled", "topology.stateful.spill.state", "topology.stateful.spill.state.location",
})


def known_keys() -> list[str]:
    return sorted({*KEYS, *READ_ELSEWHERE})


def _read(key: str) -> bool:
    return key in KEYS or key in READ_ELSEWHERE or key.startswith(READ_PREFIXES)


def key_warnings(keys: Iterable[str], where: str = "") -> list[str]:
    """One line per unknown engine key (with the likely key), then one line listing the
    accepted-but-unused Storm/Heron keys."""
    out: list[str] = []
    unused: list[str] = []
    known = known_keys()
    for key in sorted(set(keys)):
        if not isinstance(key, str) or _read(key):
            continue
        if key in ACCEPTED_UNUSED:
            unused.append(key)
            continue
        if not key.startswith(ENGINE_PREFIXES):
            continue  # the user's own key, read by their components
        close = difflib.get_close_matches(key, known, n=1, cutoff=0.8)
        hint = f"; did you mean '{close[0]}'?" if close else "; heron-py does not read it"
        out.append(f"{where}unknown config key '{key}'{hint}")
    if unused:
        out.append(f"{where}config keys accepted for Storm/Heron compatibility but not used by heron-py: "
                   f"{', '.join(unused)}")
    return out


def config_warnings(topology: TopologyDef) -> list[str]:
    """The warnings for a topology's config and each component's own config."""
    lines = key_warnings(_keys(topology.config))
    for c in topology.components:
        extra = set(_keys(c.config)) - set(_keys(topology.config))
        lines += key_warnings(extra, f"component '{c.name}': ")
    return lines


def _keys(config: Mapping[str, Any]) -> list[str]:
    return [k for k in config if isinstance(k, str)]
