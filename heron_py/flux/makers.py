"""What a Flux class maker builds with: the context of one file's build, the maker's type and
the helpers every registry member shares (``{ref: id}``, ``addComponentConfig``, a helper class
built from its constructorArgs alone).

The registry (heron_py.flux.classes) imports its members (kafka_classes, redis_classes,
jdbc_classes); the members import this module, never the registry, so filling the registry is
no import cycle.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from heron_py.api.component.component_spec import HeronComponentSpec
from heron_py.connectors.base import ConnectorConfigError
from heron_py.flux.errors import FluxError
from heron_py.flux.model import ObjectSpec

ADD_CONFIG = "addComponentConfig"


@dataclass(frozen=True)
class Context:
    """What mapping a class needs besides its declaration."""

    file: str  # the file's label in messages
    base_dir: Path  # Python classes are imported relative to it
    objects: Mapping[str, Any]  # built `components`, for `ref`

    def err(self, where: str, text: str) -> FluxError:
        return FluxError(f"flux file {self.file}: {where} {text}")


Maker = Callable[[ObjectSpec, Context, Any], HeronComponentSpec]


def resolve_refs(ctx: Context, where: str, value: Any) -> Any:
    """Flux's ``{ref: id}`` → the built component of that id (lists are walked)."""
    if isinstance(value, dict) and set(value) == {"ref"}:
        if value["ref"] not in ctx.objects:
            raise ctx.err(where, f"refers to component '{value['ref']}', which is not defined; expected one "
                                 f"of {sorted(ctx.objects)}")
        return ctx.objects[value["ref"]]
    if isinstance(value, list):
        return [resolve_refs(ctx, where, v) for v in value]
    return value


def component_config(ctx: Context, obj: ObjectSpec, allowed: tuple[str, ...] = ()) -> dict[str, Any]:
    """configMethods ``addComponentConfig(key, value)`` (Flux's wrappers have it; every
    heron-py component takes it) → the component's config. Other methods: only ``allowed``
    ones, which the caller handles."""
    config: dict[str, Any] = {}
    for m in obj.config_methods:
        if m.name == ADD_CONFIG:
            if len(m.args) != 2 or not isinstance(m.args[0], str):
                raise ctx.err(obj.where, f"configMethods '{ADD_CONFIG}': expected args [key, value], "
                                         f"found {list(m.args)!r}")
            config[m.args[0]] = resolve_refs(ctx, obj.where, m.args[1])
        elif m.name not in allowed:
            raise ctx.err(obj.where, f"configMethods '{m.name}' is not supported for className "
                                     f"'{obj.class_name}'; expected one of {[ADD_CONFIG, *allowed]}")
    return config


def constructor_args_only(factory: Callable[..., Any]) -> Callable[[ObjectSpec, Context], Any]:
    """A Flux maker for a Storm helper class built from its constructorArgs alone (a pool config,
    a mapper): properties or configMethods on it are an error, and so is a bad value."""
    def make(obj: ObjectSpec, ctx: Context) -> Any:
        args = [resolve_refs(ctx, obj.where, a) for a in obj.constructor_args]
        if obj.properties or obj.config_methods:
            raise ctx.err(obj.where, f"className '{obj.class_name}' takes constructorArgs only; found properties "
                                     f"{[p for p, _ in obj.properties]} and configMethods "
                                     f"{[m.name for m in obj.config_methods]}")
        try:
            return factory(*args)
        except ConnectorConfigError as e:
            raise ctx.err(obj.where, f"className '{obj.class_name}': {e}") from None
        except TypeError as e:
            raise ctx.err(obj.where, f"className '{obj.class_name}' could not be created with constructorArgs "
                                     f"{list(obj.constructor_args)!r} ({e})") from None
    return make
