"""Reading a Flux file: text, ``--filter`` properties, substitution, YAML, includes (the I/O)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from heron_py.flux.build import build_topology
from heron_py.flux.errors import FluxError
from heron_py.flux.model import FluxDef, parse_document
from heron_py.flux.source import parse_properties, substitute
from heron_py.planner.model import TopologyDef


def parse_yaml(text: str, file: str) -> Any:
    """YAML → plain data; a syntax error names the line and column (1-based)."""
    try:
        return yaml.safe_load(text)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        raise FluxError(f"flux file {file}: YAML syntax error{at}: {e.problem or e.context}") from e
    except yaml.YAMLError as e:
        raise FluxError(f"flux file {file}: YAML error: {e}") from e


def _read(path: Path, what: str) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError as e:
        raise FluxError(f"{what} {path} cannot be read ({e.strerror or e})") from e


def _parse_file(path: Path, props: Mapping[str, str] | None, filter_name: str | None,
                env: Mapping[str, str]) -> FluxDef:
    text = substitute(_read(path, "flux file"), path.name, props, filter_name, env)
    return parse_document(path.name, parse_yaml(text, path.name))


def _apply_includes(flux: FluxDef, path: Path, props: Mapping[str, str] | None, filter_name: str | None,
                    env: Mapping[str, str]) -> None:
    """One level, as Flux: an included file's own includes are not read."""
    for inc in flux.includes:
        if inc.resource:
            raise FluxError(f"flux file {path.name}: include '{inc.file}' has resource: true, a Java classpath "
                            f"resource, which heron-py cannot read; expected resource: false and a file path "
                            f"relative to {path.name}")
        target = path.parent / inc.file
        if not target.is_file():
            raise FluxError(f"flux file {path.name}: include '{inc.file}': file {target} does not exist")
        flux.merge(_parse_file(target, props, filter_name, env), inc.override)


def load_flux(path: Path, *, filter_file: Path | None, env: Mapping[str, str]) -> TopologyDef:
    """The topology a Flux YAML file defines. ``filter_file``: a ``.properties`` file for
    ``${name}`` (Flux's ``--filter``); ``env``: the environment for ``${ENV-NAME}``."""
    if not path.is_file():
        raise FluxError(f"flux file {path} does not exist")
    props = None
    if filter_file is not None:
        props = parse_properties(_read(filter_file, "filter file"), f"filter file {filter_file.name}")
    filter_name = filter_file.name if filter_file is not None else None
    flux = _parse_file(path, props, filter_name, env)
    _apply_includes(flux, path, props, filter_name, env)
    return build_topology(flux, path.name, path.resolve().parent)
