"""Optional dependencies a component needs (confluent_kafka for the Kafka connectors, ...).

Each connector's client is named here by the module prefix of its classes, so a topology that
uses one without it installed is refused at submit with one line saying what to
install, instead of a task failing to import it at run time.

A Streamlet source or operator is a generic component (``GeneratorSpout``, ...) whose user
object travels pickled in its config; such an object of a connector (``KafkaSource``) is found
by reading the pickle's opcodes for the globals it names (nothing is unpickled or imported)."""

from __future__ import annotations

import base64
import binascii
import importlib.util
import pickletools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from heron_py.planner.errors import TopologyError
from heron_py.planner.model import TopologyDef


@dataclass(frozen=True)
class Requirement:
    module: str  # the module that must be importable
    install: str  # what to install, e.g. heron-py[kafka]


# "package.prefix." of a component's class → what it needs
_BY_PREFIX: dict[str, Requirement] = {
    "heron_py.connectors.kafka.": Requirement("confluent_kafka", "heron-py[kafka]"),
    "heron_py.connectors.redis.": Requirement("redis", "heron-py[redis]"),
    "heron_py.connectors.rabbitmq.": Requirement("pika", "heron-py[rabbitmq]"),
    "heron_py.connectors.postgres.": Requirement("psycopg", "heron-py[postgres]"),
}


def importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


_STRING_OPS = frozenset({"SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8", "UNICODE", "STRING", "BINSTRING",
                         "SHORT_BINSTRING"})
_GET_OPS = frozenset({"GET", "BINGET", "LONG_BINGET"})
_PUT_OPS = frozenset({"PUT", "BINPUT", "LONG_BINPUT"})
_NESTED_DEPTH = 3  # the config's pickle holds the stage's packed bytes, which are a pickle


def pickled_globals(data: bytes, depth: int = 0) -> Iterator[tuple[str, str]]:
    """(module, name) of each class or function a pickle refers to, also in pickles nested in
    it as bytes, read from its opcodes only. A truncated or foreign blob ends the scan."""
    strings: list[str] = []  # pushed strings, for STACK_GLOBAL's module and name
    memo: dict[int, Any] = {}
    last: Any = None  # what the last opcode pushed, for MEMOIZE/PUT
    try:
        for op, arg, _pos in pickletools.genops(data):
            name = op.name
            if name == "GLOBAL" and isinstance(arg, str):
                mod, _, attr = arg.partition(" ")
                yield mod, attr
            elif name == "STACK_GLOBAL" and len(strings) >= 2:
                yield strings[-2], strings[-1]
            elif name == "MEMOIZE":
                memo[len(memo)] = last
                continue
            elif name in _PUT_OPS and isinstance(arg, int):
                memo[arg] = last
                continue
            elif name in _GET_OPS and isinstance(arg, int):
                last = memo.get(arg)
                if isinstance(last, str):
                    strings.append(last)
                continue
            elif name in _STRING_OPS and isinstance(arg, str):
                strings.append(arg)
                last = arg
                continue
            elif isinstance(arg, bytes) and depth < _NESTED_DEPTH and arg[:1] == b"\x80":
                yield from pickled_globals(arg, depth + 1)
            last = None
    except (ValueError, EOFError):
        return


def config_objects(config: Any) -> Iterator[tuple[str, str]]:
    """The globals of a component's pickled config values (``{"__pickled__": base64}``)."""
    for value in dict(config).values():
        if isinstance(value, dict) and isinstance(value.get("__pickled__"), str):
            try:
                data = base64.b64decode(value["__pickled__"], validate=True)
            except (binascii.Error, ValueError):
                continue
            yield from pickled_globals(data)


def check_requirements(topology: TopologyDef) -> None:
    """TopologyError for the first component whose requirement is not importable: by its
    class, or by a connector object in its config (a Streamlet KafkaSource)."""
    missing = {prefix: req for prefix, req in _BY_PREFIX.items() if not importable(req.module)}
    if not missing:
        return
    for c in topology.components:
        uses = [c.class_name, *(f"{m}:{a}" for m, a in config_objects(c.config))]
        for used in uses:
            module = used.split(":", 1)[0] + "."
            for prefix, req in missing.items():
                if module.startswith(prefix):
                    raise TopologyError(f"topology '{topology.name}': {c.kind.value} '{c.name}' ({used}) needs "
                                        f"the Python module '{req.module}', which is not installed: "
                                        f"pip install '{req.install}'")
