"""What a shell component's subprocess needs around it: heron-py's multilang adapters where
the project has none.

A Storm jar brings ``storm.py`` and ``storm.js`` from Storm's own jars, so a Storm project's
sources hold neither; heron-py provides its own (heron_py/multilang/adapters), found the way
Storm's would be and never in place of the project's:

- Python: the adapters' folder goes on the subprocess's PYTHONPATH after the entries it
  already has. ``import storm`` looks in the script's folder first, so a project's own
  ``storm.py`` beside the script wins.
- Node.js: ``require('./storm')`` resolves beside the requiring file only, so when a script
  (or a local file it requires) requires a ``storm`` that is not there, heron-py's
  ``storm.js`` is written there, never over an existing file, and only inside the working
  folder (the unpacked topology package, in a container).

What a Node.js script requires is found by heron_py.common.node_requires, which the topology
package uses too (it ships those files with the script).
"""

from __future__ import annotations

import logging
import os
import re
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any

from heron_py.common.node_requires import NODE_SCRIPTS, walk
from heron_py.common.package import command_parts
from heron_py.multilang.adapters import FOLDER, NODE_ADAPTER

NODE_PROGRAMS = re.compile(r"^nodejs$|^node[0-9.]*$")
# node options whose value is the next argument: that argument is not the script
_NODE_VALUE_OPTIONS = {"-r", "--require", "--import", "--loader", "--experimental-loader", "--input-type",
                       "-C", "--conditions", "--title", "--env-file"}
_NODE_EVAL_OPTIONS = {"-e", "--eval", "-p", "--print"}
ADAPTER_NAMES = ("storm", "storm.js")


def subprocess_env(base: Mapping[str, str]) -> dict[str, str]:
    """``base`` with heron-py's adapters' folder appended to PYTHONPATH."""
    env = dict(base)
    folder = str(FOLDER)
    current = env.get("PYTHONPATH", "")
    if folder not in current.split(os.pathsep):
        env["PYTHONPATH"] = f"{current}{os.pathsep}{folder}" if current else folder
    return env


def node_script(command: Any, cwd: Path) -> Path | None:
    """The JavaScript file a command runs with Node.js (``node x.js``, or ``./x.js`` itself),
    relative paths taken from ``cwd``; None for any other command or ``node -e``."""
    parts = command_parts(command)
    if not parts:
        return None
    script: str | None = None
    if NODE_PROGRAMS.match(Path(parts[0]).name):
        skip = False
        for arg in parts[1:]:
            if skip:
                skip = False
            elif arg in _NODE_EVAL_OPTIONS:
                return None
            elif arg in _NODE_VALUE_OPTIONS:
                skip = True
            elif not arg.startswith("-"):
                script = arg
                break
    elif parts[0].endswith(NODE_SCRIPTS):
        script = parts[0]
    if script is None or not script.endswith(NODE_SCRIPTS):
        return None
    return Path(os.path.normpath(cwd / script))


def missing_adapters(script: Path) -> list[Path]:
    """Where heron-py's storm.js must go for ``script``: each ``require('./storm')`` (or
    ``../x/storm.js``, ...) of the script or of a local file it requires that names no file."""
    _, missing = walk(script)
    out: list[Path] = []
    for requirer, name in missing:
        if PurePosixPath(name).name not in ADAPTER_NAMES:
            continue
        target = Path(os.path.normpath(requirer.parent / name))
        if target.suffix != ".js":
            target = target.with_name(target.name + ".js")
        if target not in out:
            out.append(target)
    return out


def _create(target: Path, data: bytes) -> bool:
    """Writes ``data`` to ``target`` unless it exists (never replaced); False when it did.
    The file appears whole: written aside, then linked in (other tasks of the container may
    start the same script at the same time)."""
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o644)
        try:
            os.link(tmp, target)
        except FileExistsError:
            return False
        except OSError:  # a file system without hard links
            try:
                out = os.open(target, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                return False
            with os.fdopen(out, "wb") as f:
                f.write(data)
        return True
    finally:
        os.unlink(tmp)


def provide_node_adapter(command: Sequence[str] | str, cwd: Path, log: logging.Logger, where: str) -> list[Path]:
    """Writes heron-py's storm.js where a Node.js command's script requires one that is not
    there (inside ``cwd`` only); returns the files written."""
    script = node_script(command, cwd)
    if script is None or not script.is_file():
        return []
    written: list[Path] = []
    root = cwd.resolve()
    for target in missing_adapters(script):
        if not target.parent.is_dir():
            continue
        if not target.parent.resolve().is_relative_to(root):
            log.warning("%s: %s requires %s, which does not exist; heron-py writes its storm.js only inside the "
                        "working folder %s", where, script, target, cwd)
            continue
        try:
            if _create(target, NODE_ADAPTER.read_bytes()):
                written.append(target)
                log.info("%s: wrote heron-py's multilang adapter to %s (the project has no storm.js there)",
                         where, target)
        except OSError as e:
            log.warning("%s: cannot write heron-py's storm.js to %s (%s); the script's require() of it will "
                        "fail", where, target, e)
    return written


def prepare(command: Sequence[str] | str, cwd: Path, log: logging.Logger, where: str,
            base_env: Mapping[str, str] | None = None) -> dict[str, str]:
    """Makes heron-py's adapters available to a shell command about to start in ``cwd``;
    returns the environment to start it with."""
    provide_node_adapter(command, cwd, log, where)
    return subprocess_env(os.environ if base_env is None else base_env)
