"""A Flux ``className`` → a heron-py component spec or object: the registry of class names.

Java cannot run here, so a Java class name is either one of the few Storm classes heron-py
has a Python version of (BUILTIN_SPOUTS / BUILTIN_BOLTS) or an error saying so. Anything
else is a Python "module.Class", imported with the Flux file's folder first on sys.path
(that folder ships in the topology package, so containers import it the same way).

The registry is filled here, from its members' tables (storm-kafka-client's, storm-redis' and
storm-jdbc's classes: kafka_classes, redis_classes, jdbc_classes); they build with the helpers
of heron_py.flux.makers and do not import this module back.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

# by their module names: ``from heron_py.flux import x`` would go through the package's
# __init__ (its module __getattr__), whose lazy load_flux leads back here through the loader
import heron_py.flux.jdbc_classes as jdbc_classes
import heron_py.flux.kafka_classes as kafka_classes
import heron_py.flux.redis_classes as redis_classes
from heron_py.api.bolt.base_bolt import BaseBolt
from heron_py.api.component.component_spec import HeronComponentSpec
from heron_py.api.spout.base_spout import BaseSpout
from heron_py.api.stream import Stream
from heron_py.flux.builtins import LogInfoBolt, TestWordCounter, TestWordSpout
from heron_py.flux.errors import FluxError, type_name
from heron_py.flux.makers import Context, Maker, component_config, resolve_refs
from heron_py.flux.model import ObjectSpec

SHELL_BOLT = "org.apache.storm.flux.wrappers.bolts.FluxShellBolt"
SHELL_SPOUT = "org.apache.storm.flux.wrappers.spouts.FluxShellSpout"
# Storm's own shell classes take the command only; Flux files may name them directly
STORM_SHELL_BOLT = "org.apache.storm.task.ShellBolt"
STORM_SHELL_SPOUT = "org.apache.storm.spout.ShellSpout"
_JAVA_PREFIXES = ("org.", "com.", "java.", "javax.", "net.", "io.", "backtype.", "storm.")


def is_java_name(name: str) -> bool:
    return name.startswith(_JAVA_PREFIXES)


def import_python_class(ctx: Context, where: str, name: str) -> type:
    base = str(ctx.base_dir.resolve())
    if base not in sys.path:
        sys.path.insert(0, base)  # kept: the class must stay importable for pickling
    mod, _, attr = name.rpartition(".")
    if not mod:
        raise ctx.err(where, f"className '{name}': expected a Python 'module.Class' or one of the Storm "
                             f"classes heron-py provides ({', '.join(supported_names())})")
    try:
        cls = getattr(importlib.import_module(mod), attr)
    except (ImportError, AttributeError) as e:
        raise ctx.err(where, f"className '{name}' cannot be imported as a Python class from {base} "
                             f"({type(e).__name__}: {e}); expected 'module.Class'") from e
    if not isinstance(cls, type):
        raise ctx.err(where, f"className '{name}': expected a class, found {type(cls).__name__}")
    return cls


def _no_args(ctx: Context, obj: ObjectSpec, what: str) -> None:
    if obj.constructor_args:
        raise ctx.err(obj.where, f"constructorArgs: {what}; found {list(obj.constructor_args)!r}")
    _no_properties(ctx, obj)


def _no_properties(ctx: Context, obj: ObjectSpec) -> None:
    if obj.properties:
        raise ctx.err(obj.where, f"properties: className '{obj.class_name}' has none; found "
                                 f"{[p for p, _ in obj.properties]}")


def _word_spout(obj: ObjectSpec, ctx: Context, inputs: Any) -> HeronComponentSpec:
    args = obj.constructor_args
    if len(args) > 1 or (args and not isinstance(args[0], bool)):
        raise ctx.err(obj.where, f"constructorArgs: TestWordSpout takes [] or [isDistributed (true or false)], "
                                 f"found {list(args)!r}")
    _no_properties(ctx, obj)
    # isDistributed false: Storm caps the spout at one task (topology.max.task.parallelism 1)
    par = 1 if args and args[0] is False else obj.parallelism
    return TestWordSpout.spec(name=obj.id, par=par, config=component_config(ctx, obj))


def _plain(cls: Any) -> Maker:
    def make(obj: ObjectSpec, ctx: Context, inputs: Any) -> HeronComponentSpec:
        _no_args(ctx, obj, f"{cls.__name__} takes none")
        config = component_config(ctx, obj)
        if issubclass(cls, BaseSpout):
            spec: HeronComponentSpec = cls.spec(name=obj.id, par=obj.parallelism, config=config)
        else:
            spec = cls.spec(name=obj.id, inputs=inputs, par=obj.parallelism, config=config)
        return spec
    return make


def _fields(ctx: Context, where: str, what: str, value: Any) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ctx.err(where, f"{what}: expected a list of strings, found {type_name(value)} ({value!r})")
    return list(value)


def _shell_outputs(ctx: Context, obj: ObjectSpec) -> list[Any]:
    """Output fields: constructorArgs[1] and configMethods setDefaultStream([fields]) /
    setNamedStream(name, [fields]), as Flux's FluxShellBolt/FluxShellSpout declare them."""
    streams: dict[str, list[str]] = {}
    if len(obj.constructor_args) == 2:
        streams["default"] = _fields(ctx, obj.where, "constructorArgs[1] (output fields)", obj.constructor_args[1])
    for m in obj.config_methods:
        if m.name == "setDefaultStream" and len(m.args) == 1:
            streams["default"] = _fields(ctx, obj.where, "setDefaultStream args[0]", m.args[0])
        elif m.name == "setNamedStream" and len(m.args) == 2 and isinstance(m.args[0], str):
            streams[m.args[0]] = _fields(ctx, obj.where, f"setNamedStream '{m.args[0]}' args[1]", m.args[1])
        elif m.name in ("setDefaultStream", "setNamedStream"):
            raise ctx.err(obj.where, f"configMethods '{m.name}': expected args [[fields]] (setDefaultStream) or "
                                     f"[name, [fields]] (setNamedStream), found {list(m.args)!r}")
    outputs: list[Any] = list(streams.pop("default", []))
    outputs.extend(Stream(fields, name=name) for name, fields in streams.items())
    return outputs


def _shell(is_spout: bool) -> Maker:
    def make(obj: ObjectSpec, ctx: Context, inputs: Any) -> HeronComponentSpec:
        args = obj.constructor_args
        if len(args) not in (1, 2):
            raise ctx.err(obj.where, f"constructorArgs: expected [[command, args...]] or [[command, args...], "
                                     f"[output fields]], found {list(args)!r}")
        command = _fields(ctx, obj.where, "constructorArgs[0] (command line)", args[0])
        if not command:
            raise ctx.err(obj.where, "constructorArgs[0] (command line): expected a command, found []")
        _no_properties(ctx, obj)
        config = component_config(ctx, obj, ("setDefaultStream", "setNamedStream"))
        outputs = _shell_outputs(ctx, obj)
        try:
            # imported here: written separately, and only Flux files with shell components need it
            from heron_py.api import shell  # type: ignore[attr-defined,unused-ignore]
        except ImportError as e:
            raise ctx.err(obj.where, f"className '{obj.class_name}' needs heron_py.api.shell, which this "
                                     f"heron-py does not have ({e})") from e
        spec: HeronComponentSpec
        if is_spout:
            spec = shell.ShellSpout.spec(command, outputs=outputs, par=obj.parallelism, config=config, name=obj.id)
        else:
            spec = shell.ShellBolt.spec(command, outputs=outputs, inputs=inputs, par=obj.parallelism,
                                        config=config, name=obj.id)
        return spec
    return make


BUILTIN_SPOUTS: dict[str, Maker] = {
    "org.apache.storm.testing.TestWordSpout": _word_spout,
    SHELL_SPOUT: _shell(True),
    STORM_SHELL_SPOUT: _shell(True),
}
BUILTIN_BOLTS: dict[str, Maker] = {
    "org.apache.storm.testing.TestWordCounter": _plain(TestWordCounter),
    "org.apache.storm.flux.wrappers.bolts.LogInfoBolt": _plain(LogInfoBolt),
    SHELL_BOLT: _shell(False),
    STORM_SHELL_BOLT: _shell(False),
}
# the members, in the order their names are looked up (as objects: make_object)
_MEMBERS = (kafka_classes, redis_classes, jdbc_classes)
for _member in _MEMBERS:
    BUILTIN_SPOUTS.update(_member.SPOUTS)
    BUILTIN_BOLTS.update(_member.BOLTS)


def supported_names() -> list[str]:
    return [*BUILTIN_SPOUTS, *BUILTIN_BOLTS]


def _java_error(ctx: Context, obj: ObjectSpec) -> FluxError:
    return ctx.err(obj.where, f"className '{obj.class_name}' is a Java class; heron-py runs Python components "
                              f"only: use one of {', '.join(supported_names())} or a Python class 'module.Class' "
                              f"(a Java ShellBolt/ShellSpout subclass: declare it as {SHELL_BOLT} / "
                              f"{SHELL_SPOUT} with its command and output fields)")


def _python_component(obj: ObjectSpec, ctx: Context, inputs: Any, is_spout: bool) -> HeronComponentSpec:
    cls: Any = import_python_class(ctx, obj.where, obj.class_name)
    base = BaseSpout if is_spout else BaseBolt
    if not issubclass(cls, base):
        raise ctx.err(obj.where, f"className '{obj.class_name}': expected a heronpy "
                                 f"{'Spout' if is_spout else 'Bolt'} subclass, found {cls.__mro__[1:-1]!r}")
    if obj.constructor_args:
        raise ctx.err(obj.where, "constructorArgs: heronpy components are created by heron-py without arguments; "
                                 "use 'properties' (they arrive in the component's config) instead")
    config = component_config(ctx, obj)
    # Flux's bean properties → the component's config, the heronpy way to parameterize one
    config.update({name: resolve_refs(ctx, obj.where, v) for name, v in obj.properties})
    spec: HeronComponentSpec
    if is_spout:
        spec = cls.spec(name=obj.id, par=obj.parallelism, config=config)
    else:
        spec = cls.spec(name=obj.id, inputs=inputs, par=obj.parallelism, config=config)
    return spec


def make_component(obj: ObjectSpec, ctx: Context, inputs: Any, is_spout: bool) -> HeronComponentSpec:
    """The spec of one spout (``is_spout``) or bolt; ``inputs`` as TopologyBuilder takes them."""
    mine, other = (BUILTIN_SPOUTS, BUILTIN_BOLTS) if is_spout else (BUILTIN_BOLTS, BUILTIN_SPOUTS)
    if obj.class_name in mine:
        return mine[obj.class_name](obj, ctx, inputs)
    if obj.class_name in other:
        raise ctx.err(obj.where, f"className '{obj.class_name}' is a {'bolt' if is_spout else 'spout'}; "
                                 f"expected a {'spout' if is_spout else 'bolt'} class")
    if is_java_name(obj.class_name):
        raise _java_error(ctx, obj)
    return _python_component(obj, ctx, inputs, is_spout)


def make_object(obj: ObjectSpec, ctx: Context) -> Any:
    """A plain object (a `components` entry or a custom grouping): a Python class called with
    constructorArgs, then bean ``properties`` set and ``configMethods`` called, as Flux does."""
    for member in _MEMBERS:
        if obj.class_name in member.OBJECTS:
            return member.OBJECTS[obj.class_name](obj, ctx)
    if is_java_name(obj.class_name):
        raise ctx.err(obj.where, f"className '{obj.class_name}' is a Java class; heron-py can only create "
                                 f"Python objects here: expected a Python class 'module.Class'")
    cls = import_python_class(ctx, obj.where, obj.class_name)
    args = [resolve_refs(ctx, obj.where, a) for a in obj.constructor_args]
    try:
        instance = cls(*args)
        for name, value in obj.properties:
            setattr(instance, name, resolve_refs(ctx, obj.where, value))
        for m in obj.config_methods:
            getattr(instance, m.name)(*[resolve_refs(ctx, obj.where, a) for a in m.args])
    except Exception as e:
        raise ctx.err(obj.where, f"className '{obj.class_name}' could not be created with constructorArgs "
                                 f"{list(obj.constructor_args)!r} ({type(e).__name__}: {e})") from e
    return instance

