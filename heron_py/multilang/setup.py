"""What a shell component is configured with, and the handshake's conf and context.

The config keys live in the component's spec config (ShellBolt.spec / ShellSpout.spec put
them there), so they travel with the topology like any component config.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from heron_py.common.package import PACKAGE_DIR_ATTR, working_folder
from heron_py.multilang.codec import DEFAULT_MAX_BYTES, LIMIT_KEY, check_serializer
from heron_py.planner.model import GroupingKind

if TYPE_CHECKING:  # annotations only: multilang is below the API it serves (api/shell.py)
    from heron_py.api.topology_context import TopologyContext

COMMAND_KEY = "heron_py.shell.command"
SERIALIZER_KEY = "heron_py.shell.serializer"
CWD_KEY = "heron_py.shell.cwd"  # overrides the package folder (tests, or scripts installed elsewhere)
TIMEOUT_KEY = "topology.subprocess.timeout.secs"  # Storm's
WORKER_TIMEOUT_KEY = "supervisor.worker.timeout.secs"  # Storm's fallback for the above
MAX_PENDING_KEY = "topology.shellbolt.max.pending"  # Storm's: tuples queued for the subprocess
DEFAULT_TIMEOUT_S = 30.0
DEFAULT_MAX_PENDING = 100
MAIN_MODULE = "__heron_main__"  # heron_py.common.serialization.MAIN_ALIAS: the loaded topology file


def parse_command(command: Any, where: str) -> list[str]:
    """A command as a list of str; a str is split as a shell would (shlex)."""
    if isinstance(command, str):
        parts = shlex.split(command)
    elif isinstance(command, (list, tuple)) and all(isinstance(c, str) for c in command):
        parts = list(command)
    else:
        raise TypeError(f"{where}: command must be a list of str (or one str, split like a shell does); "
                        f"found {command!r}")
    if not parts:
        raise ValueError(f"{where}: command is empty; expected e.g. ['python3', 'splitsentence.py']")
    return parts


@dataclass(frozen=True)
class ShellConfig:
    command: list[str]
    serializer: str
    timeout_s: float
    max_bytes: int
    max_pending: int
    cwd: Path

    @classmethod
    def from_conf(cls, conf: Mapping[str, Any], where: str) -> ShellConfig:
        if conf.get(COMMAND_KEY) is None:
            raise ValueError(f"{where}: no command in config key '{COMMAND_KEY}'; declare the component with "
                             f"ShellBolt.spec(command, ...) / ShellSpout.spec(command, ...)")
        timeout = conf.get(TIMEOUT_KEY, conf.get(WORKER_TIMEOUT_KEY, DEFAULT_TIMEOUT_S))
        return cls(command=parse_command(conf[COMMAND_KEY], where),
                   serializer=check_serializer(conf.get(SERIALIZER_KEY, "json"), where),
                   timeout_s=_positive(timeout, TIMEOUT_KEY, where),
                   max_bytes=int(_positive(conf.get(LIMIT_KEY, DEFAULT_MAX_BYTES), LIMIT_KEY, where)),
                   max_pending=int(_positive(conf.get(MAX_PENDING_KEY, DEFAULT_MAX_PENDING), MAX_PENDING_KEY,
                                             where)),
                   cwd=working_dir(conf.get(CWD_KEY)))


def _positive(value: Any, key: str, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise ValueError(f"{where}: config '{key}' must be a number > 0; found {value!r}")
    return float(value)


def package_dir() -> Path | None:
    """The folder the topology package was unpacked to (heron_py.common.package.load_main
    names it on the topology's module); outside a packaged task, the folder of the topology
    file the process loaded; None when there is none."""
    main = sys.modules.get(MAIN_MODULE)
    unpacked = getattr(main, PACKAGE_DIR_ATTR, None)
    if unpacked:
        return Path(unpacked)
    f = getattr(main, "__file__", None)
    return Path(f).resolve().parent if f else None


def package_working_dir() -> Path | None:
    """The working folder of the unpacked topology package this process runs (its manifest's
    ``workdir``, else Storm's rule below); None outside a packaged task."""
    unpacked = getattr(sys.modules.get(MAIN_MODULE), PACKAGE_DIR_ATTR, None)
    return working_dir(package=Path(unpacked)) if unpacked else None


def working_dir(override: Any = None, package: Path | None = None, cwd: Path | None = None) -> Path:
    """Where a component's process runs: ``override`` (config ``heron_py.shell.cwd``), else the
    working folder the package's manifest names (the project's shape decided it at submit:
    heron_py.common.layout), else Storm's rule: the package's ``resources/`` folder if it has
    one, else the package folder; outside a package (in-process tests) the current folder
    stands for it."""
    if override:
        return Path(str(override))
    base = package or package_dir() or cwd or Path(os.getcwd())
    named = working_folder(base)
    if named is not None:
        return named
    resources = base / "resources"
    return resources if resources.is_dir() else base


def json_safe(value: Any) -> Any:
    """``value`` if JSON can carry it, else its str (a conf may hold any picklable object)."""
    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        return str(value)


def handshake_conf(conf: Mapping[str, Any], topology_name: str) -> dict[str, Any]:
    out = {str(k): json_safe(v) for k, v in conf.items()}
    out.setdefault("topology.name", topology_name)  # pystorm reads it
    return out


def _grouping(g: Any) -> dict[str, Any]:
    # Storm's names (TopologyContext.groupingToJSONableMap); heronpy's "lowest" is Storm's global
    kind = "global" if g.kind is GroupingKind.LOWEST else g.kind.value
    return {"type": kind, "fields": list(g.fields)} if g.kind is GroupingKind.FIELDS else {"type": kind}


def handshake_context(context: TopologyContext) -> dict[str, Any]:
    """Storm's TopologyContext.toJSONString for this task."""
    topo = context.topology
    me = context.get_component_id()
    comp = topo.component(me)
    fields = {c.name: {s.name: list(s.fields) for s in c.outputs} for c in topo.components}
    targets: dict[str, dict[str, Any]] = {}
    for other in topo.components:
        for i in other.inputs:
            if i.component == me:
                targets.setdefault(i.stream, {})[other.name] = _grouping(i.grouping)
    sources: dict[str, dict[str, Any]] = {}
    source_fields: dict[str, dict[str, Any]] = {}
    for i in comp.inputs:
        sources.setdefault(i.component, {})[i.stream] = _grouping(i.grouping)
        source_fields.setdefault(i.component, {})[i.stream] = fields.get(i.component, {}).get(i.stream, [])
    return {
        "task->component": {str(t): c for t, c in sorted(context.get_task_to_component_map().items())},
        "taskid": context.get_task_id(),
        "componentid": me,
        "streams": [s.name for s in comp.outputs],
        "stream->outputfields": fields.get(me, {}),
        "stream->target->grouping": targets,
        "source->stream->grouping": sources,
        "source->stream->fields": source_fields,
    }


def spec_config(command: Any, serializer: Any, config: Mapping[str, Any] | None, where: str,
                default: Sequence[str] | None = None) -> dict[str, Any]:
    """The spec's config: the user's plus the command (a list) and the serializer."""
    out = dict(config or {})
    if command is None:
        command = out.get(COMMAND_KEY, default)
    if command is None:
        raise ValueError(f"{where}: no command; pass command=[...] (e.g. ['python3', 'splitsentence.py']) or "
                         f"set config '{COMMAND_KEY}'")
    out[COMMAND_KEY] = parse_command(command, where)
    out[SERIALIZER_KEY] = check_serializer(out.get(SERIALIZER_KEY, serializer) if serializer == "json"
                                           else serializer, where)
    return out
