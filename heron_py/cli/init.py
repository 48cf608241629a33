"""``heron-py init NAME``: a small project that runs as written.

A topology file, a spout, two bolts, a test that runs the whole topology in one process with
``heron_py.testing.run_in_process``, and a README with the commands to run it. The files are
the templates in ``templates/project/`` with ``$name`` replaced (string.Template).
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from string import Template

from heron_py.cli.errors import SubmitError

NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]*")
TEMPLATES = "templates/project"
SUFFIX = ".tmpl"


def project_files(name: str) -> dict[str, str]:
    """File name → text of the project ``name`` (pure)."""
    if not NAME.fullmatch(name):
        raise SubmitError(f"init {name!r}: expected a name of letters, digits, '_' and '-' that starts with a "
                          f"letter (it names the folder and the topology), e.g. wordcount")
    folder = resources.files("heron_py.cli").joinpath(TEMPLATES)
    out = {}
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if entry.name.endswith(SUFFIX):
            out[entry.name[:-len(SUFFIX)]] = Template(entry.read_text(encoding="utf-8")).substitute(name=name)
    return out


def write_project(name: str, parent: Path) -> Path:
    """Writes the project into ``parent / name``, which must not exist or be empty."""
    files = project_files(name)
    dest = parent / name
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise SubmitError(f"init {name}: {dest} already exists and is not an empty folder; expected a new "
                          f"folder (choose another name, or remove it)")
    dest.mkdir(parents=True, exist_ok=True)
    for file, text in files.items():
        (dest / file).write_text(text, encoding="utf-8")
    return dest


def cmd_init(args: argparse.Namespace) -> int:
    dest = write_project(args.name, Path(args.directory))
    print(f"created {dest}: {', '.join(sorted(p.name for p in dest.iterdir()))}")
    print(f"next: cd {dest} && python -m pytest -q && heron-py run topology.py")
    return 0


def add_parser(add_parser: Callable[..., argparse.ArgumentParser]) -> None:
    p = add_parser("init", state=False, help="write a small project (topology, spout, bolts, test, README)")
    p.add_argument("name", metavar="NAME", help="the project's folder and topology name, e.g. wordcount")
    p.add_argument("--directory", default=".", metavar="DIR", help="where to create the folder (default: here)")
    p.set_defaults(fn=cmd_init)
