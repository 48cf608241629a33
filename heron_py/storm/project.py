"""A streamparse project's layout: config.json, topologies/ and src/ in one folder.

``sparse`` runs components with the project's src/ as the import root (the topology file
says ``from bolts.wordcount import WordCountBolt``). At submit, heron-py puts src/ on
``sys.path`` before the topology file runs, so those imports work; the topology package
ships src/ whole, as ``sparse submit`` puts it in the jar's resources/ (heron_py.common.layout
finds the project). config.json is for deploying to Storm (nimbus, workers,
virtualenvs, ssh): only ``serializer`` (for subprocess components) and ``envs`` (to pick a
per-environment parallelism) are read; nothing in it is required.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from heron_py.common.layout import STREAMPARSE_SRC, find_streamparse_root
from heron_py.planner.errors import TopologyError


@dataclass(frozen=True)
class Project:
    root: Path
    config: dict[str, Any] = field(default_factory=dict)

    @property
    def src(self) -> Path:
        return self.root / STREAMPARSE_SRC

    @property
    def serializer(self) -> str:
        value = self.config.get("serializer", "json")
        return value if isinstance(value, str) else "json"

    @property
    def env_names(self) -> list[str]:
        envs = self.config.get("envs")
        return sorted(envs) if isinstance(envs, dict) else []


def find_project(topology_file: Path) -> Project | None:
    """The streamparse project holding ``topology_file``, or None for a plain topology file."""
    root = find_streamparse_root(topology_file)
    return Project(root, _read_config(root / "config.json")) if root is not None else None


def _read_config(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise TopologyError(f"streamparse project config {path} cannot be read: {e}; expected a JSON "
                            f"object (or remove the file: heron-py needs nothing from it)") from e
    if not isinstance(data, dict):
        raise TopologyError(f"streamparse project config {path}: expected a JSON object, "
                            f"found {type(data).__name__}")
    return data


def add_project_paths(topology_file: Path) -> Project | None:
    """Puts a streamparse project's src/ first on ``sys.path`` (kept there: the package is
    built from ``sys.path`` after the topology file ran). No-op outside a project."""
    project = find_project(topology_file)
    if project is not None:
        src = str(project.src)
        if src not in sys.path:
            sys.path.insert(0, src)
    return project
