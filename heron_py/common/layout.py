"""Which folders of a project the topology package ships whole, and where the package's
components run (pure but for reading the file system).

Storm ships a topology's jar, and a shell component's process runs in the jar's ``resources/``
folder as the supervisor extracted it (ShellProcess: the task context's code dir,
``stormdist/ID/resources``). streamparse's ``sparse submit`` builds that jar from the
project's ``src/``, copied whole into the jar's ``resources/`` (``prepare_topology``), so a
streamparse component runs with ``src/``'s contents as its working folder. heron-py ships the
same folders whole, by the shape of the project around the topology:

- a **streamparse project** (``config.json``, ``topologies/``, ``src/``): ``src/`` whole at
  the package root; the working folder is the package root (``src/``'s contents).
- a **Flux YAML in a Maven project** (a ``pom.xml`` in the YAML's folder or up to
  ``MAVEN_UP`` folders above): what ``mvn package`` puts in the jar: each of the pom's
  ``<build><resources>`` (``src/main/resources`` when it declares none) with its
  ``targetPath``, ``includes`` and ``excludes``, plus ``multilang/`` at the project root
  (storm-starter's pom declares it, so ``multilang/resources/`` becomes the jar's
  ``resources/``); the working folder is ``resources/``.
- any other **Flux YAML**: its folder whole; the working folder is its ``resources/`` if it
  has one, else the package root.
- a **Python package folder** holding ``__main__.py`` (``python -m mytopo``): the top-level
  package folder whole, under its name; the working folder is the package folder's
  ``resources/`` if it has one, else the package folder.
- a **Python file**: ``resources/`` beside it (its modules are collected from its imports:
  heron_py.common.package); the working folder is ``resources/`` if it has one, else the
  package root.

Never shipped, at any depth (``ignored``): hidden files and folders (``.git``, ``.venv``,
``.tox``, ``.mypy_cache``, ``.pytest_cache``, ``.DS_Store``...), ``__pycache__`` and
``*.pyc``/``*.pyo``, virtualenvs under any name (a folder holding ``pyvenv.cfg``),
``*.egg-info``, and ``build/`` and ``dist/`` folders that are not Python packages (no
``__init__.py``). ``node_modules`` ships: a Node.js script loads it at run time, as from a
Storm jar.
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from xml.etree.ElementTree import Element

RESOURCES = "resources"
POM = "pom.xml"
MAVEN_UP = 4  # src/main/resources/flux/x.yaml is four folders below the project root
MAVEN_DEFAULT_RESOURCES = "src/main/resources"
MULTILANG = "multilang"
PACKAGE_MAIN = "__main__.py"
STREAMPARSE_SRC = "src"
STREAMPARSE_UP = 3  # topologies/NAME.py is one level below the root; allow a little nesting

PYTHON = "python"
PACKAGE = "package"
STREAMPARSE = "streamparse"
FLUX = "flux"
MAVEN = "maven"

IGNORED = ("hidden files and folders (.git, .venv, .tox, .mypy_cache, .pytest_cache, ...)", "__pycache__",
           "*.pyc", "*.pyo", "virtualenvs (a folder holding pyvenv.cfg)", "*.egg-info",
           "build/ and dist/ that are not Python packages")
_SKIP_SUFFIXES = (".pyc", ".pyo")
_BUILD_OUTPUTS = ("build", "dist")
# the properties a pom's resource directory may name that mean the project's folder
_BASEDIR = re.compile(r"\$\{(?:project\.basedir|basedir|pom\.basedir)\}")
_PROPERTY = re.compile(r"\$\{([^}]+)\}")


def ignored_dir(folder: Path) -> bool:
    """Whether a folder met while shipping a tree is left out, with everything in it."""
    name = folder.name
    if name.startswith(".") or name == "__pycache__" or name.endswith(".egg-info"):
        return True
    if (folder / "pyvenv.cfg").is_file():
        return True
    return name in _BUILD_OUTPUTS and not (folder / "__init__.py").is_file()


def ignored_file(name: str) -> bool:
    return name.startswith(".") or name.endswith(_SKIP_SUFFIXES) or name.endswith("~")


def _ant_match(pattern: str, rel: str) -> bool:
    """Maven's (Ant's) path patterns: ``**`` any number of folders, ``*`` and ``?`` within one
    name; a pattern ending in ``/`` means everything below that folder."""
    pat = pattern.replace("\\", "/").strip()
    if pat.endswith("/"):
        pat += "**"
    return _match_parts(pat.strip("/").split("/"), rel.split("/"))


def _match_parts(pat: list[str], parts: list[str]) -> bool:
    if not pat:
        return not parts
    if pat[0] == "**":
        return any(_match_parts(pat[1:], parts[i:]) for i in range(len(parts) + 1))
    return bool(parts) and fnmatch.fnmatchcase(parts[0], pat[0]) and _match_parts(pat[1:], parts[1:])


@dataclass(frozen=True)
class Tree:
    """A folder shipped whole (minus the ignored), its files under ``target`` in the package;
    with ``includes``/``excludes`` (Maven's), only the files they select."""
    source: Path
    target: str = ""
    includes: tuple[str, ...] = ()
    excludes: tuple[str, ...] = ()

    def files(self) -> dict[str, Path]:
        """Archive name → file. Symbolic links are followed (their targets ship), once each."""
        out: dict[str, Path] = {}
        for rel, path in _walk(self.source):
            if self.includes and not any(_ant_match(p, rel) for p in self.includes):
                continue
            if any(_ant_match(p, rel) for p in self.excludes):
                continue
            out[f"{self.target}/{rel}" if self.target else rel] = path
        return out

    def arc_of(self, arc: str) -> Path | None:
        """The file of this tree that would ship as ``arc``, whether or not it exists."""
        if self.target and not arc.startswith(f"{self.target}/"):
            return None
        return self.source / (arc[len(self.target) + 1:] if self.target else arc)


def _walk(source: Path) -> Iterator[tuple[str, Path]]:
    """(path relative to ``source`` in POSIX form, file) of every file not ignored, sorted."""
    if not source.is_dir():
        return
    seen: set[str] = set()
    for folder, dirs, names in os.walk(source, followlinks=True):
        here = Path(folder)
        real = os.path.realpath(folder)
        if real in seen:  # a link back up the tree
            dirs[:] = []
            continue
        seen.add(real)
        dirs[:] = sorted(d for d in dirs if not ignored_dir(here / d))
        for name in sorted(names):
            path = here / name
            if ignored_file(name) or not path.is_file():  # a dangling link ships nothing
                continue
            yield path.relative_to(source).as_posix(), path


@dataclass(frozen=True)
class Layout:
    """How a topology's project ships: the topology file's name in the package, the folders
    shipped whole, and the working folder of its components' processes (relative to the
    package root; ``""`` is the root)."""
    kind: str
    topology: Path  # the topology file (a package's __main__.py)
    main: str  # its archive name
    root: Path  # the folder the package root stands for when modules are looked up
    trees: tuple[Tree, ...]
    workdir: str
    package: str | None = None  # the dotted name a package's __main__.py runs in
    notes: tuple[str, ...] = ()  # what the submitter should hear (a pom read in part)

    @property
    def module(self) -> str | None:
        """The module name the topology file's relative imports resolve against."""
        return f"{self.package}.__main__" if self.package else None

    def sources_of(self, arc: str) -> list[Path]:
        """Where ``arc`` would come from, in each shipped tree."""
        return [p for t in self.trees if (p := t.arc_of(arc)) is not None]


def python_package(folder: Path) -> tuple[Path, str, Path] | None:
    """A folder holding ``__main__.py``, run as ``python -m`` runs a package: (the folder
    ``python -m`` runs from, the package's dotted name, its top-level package folder); its
    parents count as long as each is a regular package (an ``__init__.py``). None for any
    other path."""
    folder = folder.resolve()
    if not (folder / PACKAGE_MAIN).is_file():
        return None
    parts = [folder.name]
    top = folder
    while (top / "__init__.py").is_file() and (top.parent / "__init__.py").is_file():
        top = top.parent
        parts.insert(0, top.name)
    return top.parent, ".".join(parts), top


def is_streamparse_root(folder: Path) -> bool:
    return ((folder / "config.json").is_file() and (folder / "topologies").is_dir()
            and (folder / STREAMPARSE_SRC).is_dir())


def find_streamparse_root(topology_file: Path) -> Path | None:
    """The streamparse project holding ``topology_file`` (``topologies/NAME.py``, a little
    nesting allowed), or None."""
    folder = topology_file.resolve().parent
    for _ in range(STREAMPARSE_UP + 1):
        if is_streamparse_root(folder):
            return folder
        if folder.parent == folder:
            break
        folder = folder.parent
    return None


def find_maven_root(folder: Path) -> Path | None:
    """The nearest folder holding a pom.xml: ``folder`` or one of its ``MAVEN_UP`` parents."""
    here = folder.resolve()
    for _ in range(MAVEN_UP + 1):
        if (here / POM).is_file():
            return here
        if here.parent == here:
            break
        here = here.parent
    return None


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def _child(node: Element, name: str) -> Element | None:
    return next((c for c in node if _local(c.tag) == name), None)


def _texts(node: Element | None, name: str) -> tuple[str, ...]:
    if node is None:
        return ()
    return tuple((c.text or "").strip() for c in node if _local(c.tag) == name and (c.text or "").strip())


def maven_resources(root: Path) -> tuple[list[Tree], list[str]]:
    """The trees ``mvn package`` puts in the jar from ``root``'s pom (its ``<build><resources>``,
    else ``src/main/resources``), and notes on what of the pom could not be followed."""
    import xml.etree.ElementTree as ET  # only for a Maven project's pom

    pom = root / POM
    notes: list[str] = []
    try:
        project = ET.parse(pom).getroot()
    except (OSError, ET.ParseError) as e:
        notes.append(f"{pom} cannot be read as a Maven POM ({type(e).__name__}: {e}); shipping "
                     f"{MAVEN_DEFAULT_RESOURCES}, Maven's default resources folder")
        project = None
    props: dict[str, str] = {}
    declared: list[Element] = []
    if project is not None:
        props_node = _child(project, "properties")
        if props_node is not None:
            props = {_local(c.tag): (c.text or "").strip() for c in props_node}
        build = _child(project, "build")
        resources = _child(build, "resources") if build is not None else None
        declared = [r for r in resources if _local(r.tag) == "resource"] if resources is not None else []
    if not declared:
        return [Tree(root / MAVEN_DEFAULT_RESOURCES)], notes
    trees: list[Tree] = []
    for node in declared:
        directory = _texts(node, "directory")
        raw = directory[0] if directory else MAVEN_DEFAULT_RESOURCES
        text = _PROPERTY.sub(lambda m: props.get(m.group(1), m.group(0)), _BASEDIR.sub(str(root), raw))
        if "${" in text:
            notes.append(f"{pom}: resource directory '{raw}' names a property that is not in the pom's "
                         f"<properties>; expected a path relative to the project or ${{basedir}}; not shipped")
            continue
        source = Path(text) if Path(text).is_absolute() else root / text
        target = (_texts(node, "targetPath") or ("",))[0].strip("/")
        includes = _texts(_child(node, "includes"), "include")
        excludes = _texts(_child(node, "excludes"), "exclude")
        trees.append(Tree(source, target, includes, excludes))
    return trees, notes


def layout_of(topology: Path) -> Layout:
    """The layout of the project around ``topology`` (a topology file, or a Python package
    folder holding ``__main__.py``)."""
    topology = topology.resolve()
    package = python_package(topology) if topology.is_dir() else None
    if package is not None:
        where, dotted, top = package
        main = topology / PACKAGE_MAIN
        inner = topology.relative_to(where).as_posix()
        workdir = f"{inner}/{RESOURCES}" if (topology / RESOURCES).is_dir() else inner
        return Layout(PACKAGE, main, main.relative_to(where).as_posix(), where, (Tree(top, top.name),), workdir,
                      package=dotted)
    folder = topology.parent
    if topology.suffix in (".yaml", ".yml"):
        maven = find_maven_root(folder)
        if maven is not None:
            trees, notes = maven_resources(maven)
            if (maven / MULTILANG).is_dir() and all(t.source.resolve() != (maven / MULTILANG).resolve()
                                                   for t in trees):
                trees.append(Tree(maven / MULTILANG))
            return Layout(MAVEN, topology, topology.name, folder, tuple(trees), RESOURCES, notes=tuple(notes))
        workdir = RESOURCES if (folder / RESOURCES).is_dir() else ""
        return Layout(FLUX, topology, topology.name, folder, (Tree(folder),), workdir)
    project = find_streamparse_root(topology)
    if project is not None:
        return Layout(STREAMPARSE, topology, topology.name, folder, (Tree(project / STREAMPARSE_SRC),), "")
    resources = folder / RESOURCES
    if resources.is_dir():
        return Layout(PYTHON, topology, topology.name, folder, (Tree(resources, RESOURCES),), RESOURCES)
    return Layout(PYTHON, topology, topology.name, folder, (), "")
