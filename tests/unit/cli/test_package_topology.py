"""A heronpy topology laid out as a package with __main__.py (tests/projects/heronpy_package)
given to the CLI by its folder: run as ``python -m mytopo`` runs it, relative imports and all."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.foreign import Foreign, Ours

PACKAGE = Path(__file__).resolve().parents[2] / "projects" / "heronpy_package" / "mytopo"
CLI = [sys.executable, "-m", "heron_py.cli.main"]


def _cli(home: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=60, cwd=cwd,
                          env=dict(os.environ, HERON_PY_HOME=str(home)))


def test_a_package_folder_dry_runs_and_runs_in_process(tmp_path):
    p = _cli(tmp_path / "home", "submit", "local", "--dry-run", str(PACKAGE), "wc", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines()[:5] == [
        "topology 'wc' (dry run: nothing stored, nothing launched)", "components:",
        "  letters (spout mytopo.spouts:Letters, par 1) outputs: default[letter]",
        "  shout (bolt mytopo.bolts:Shout, par 2) inputs: letters/default shuffle; outputs: default[letter]",
        "  sink (bolt __main__:Sink, par 1) inputs: shout/default shuffle; outputs: none"]
    p = _cli(tmp_path / "home", "run", str(PACKAGE), "--duration", "2", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines()[-1].endswith("tuples received per bolt: shout 3, sink 3")


def test_a_folder_without_main_and_a_failing_relative_import_are_one_line(tmp_path):
    p = _cli(tmp_path / "home", "submit", "local", "--dry-run", str(tmp_path), cwd=tmp_path)
    assert (p.returncode, p.stdout) == (1, "")
    assert p.stderr == (f"heron-py: error: topology file {tmp_path} is a directory without a __main__.py; expected "
                        f"a Python file (.py) or a Flux file (.yaml, .yml), or a Python package folder holding "
                        f"__main__.py (e.g. {tmp_path / 'topology.py'})\n")
    broken = tmp_path / "mytopo"
    shutil.copytree(PACKAGE, broken)
    (broken / "bolts.py").unlink()
    p = _cli(tmp_path / "home", "submit", "local", "--dry-run", str(broken), cwd=tmp_path)
    assert (p.returncode, p.stdout) == (1, "")
    # python -m's semantics: the relative import names mytopo.bolts
    assert p.stderr == Ours(f"heron-py: error: {broken} failed while building its topology: ",
                            Foreign("ModuleNotFoundError"),
                            f" (at {broken / '__main__.py'}:7: from .bolts import Shout)\n")
    assert "'mytopo.bolts'" in p.stderr
