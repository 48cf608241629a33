"""Run a topology file on the local scheduler (real processes) from a test."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from heron_py.common import config as cfgkeys


@dataclass
class LocalRun:
    name: str
    home: Path
    received: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    submit_output: str = ""

    def values(self, component: str) -> list[list[Any]]:
        return [r["values"] for r in self.received.get(component, [])]


def _cli(home: Path, *args: str, timeout: float = 120,
         env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **(env or {}), "HERON_PY_HOME": str(home)}
    return subprocess.run([sys.executable, "-m", "heron_py.cli.main", *args], env=env, text=True,
                          capture_output=True, timeout=timeout)


def complete_lines(path: Path) -> list[str]:
    """The lines of a file another process is appending to, without a half-written last one.
    One read: iterating the file would read again after that half line and take its rest for a
    line of its own."""
    return path.read_bytes().decode("utf-8", errors="replace").split("\n")[:-1]


def split_complete(data: bytes) -> tuple[list[bytes], int]:
    """The whole lines of ``data`` (without their newlines) and how many bytes they take; a
    half-written last line is not one of them and is read again with its rest. Pure."""
    end = data.rfind(b"\n") + 1
    return (data[:end - 1].split(b"\n") if end else []), end


class CaptureReader:
    """The capture files of ``components`` (``COMPONENT-TASK.jsonl``, appended to by the tasks),
    read incrementally: each ``read`` parses only the whole lines appended since the last one,
    so polling a run that captured 200,000 tuples costs what arrived since, not the 200,000.
    A file that shrank was written anew (a rerun into the same folder) and is read from its start."""

    def __init__(self, capture_dir: Path, components: Iterable[str]) -> None:
        self.capture_dir = capture_dir
        self.components = list(components)
        self._offsets: dict[Path, int] = {}
        self._rows: dict[Path, list[dict[str, Any]]] = {}
        self.bytes_read = 0  # what all reads took from the files: tests check it grows by the appends only

    def _read_file(self, f: Path) -> list[dict[str, Any]]:
        rows = self._rows.setdefault(f, [])
        offset = self._offsets.get(f, 0)
        with f.open("rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if size < offset:
                rows.clear()
                offset = 0
            fh.seek(offset)
            data = fh.read(size - offset)  # one read up to the size seen: a line cut there waits
        self.bytes_read += len(data)
        lines, used = split_complete(data)
        rows.extend(json.loads(line.decode("utf-8", errors="replace")) for line in lines)
        self._offsets[f] = offset + used
        return rows

    def read(self) -> dict[str, list[dict[str, Any]]]:
        """Component -> every tuple captured so far, file by file (task order), each file's in order."""
        out: dict[str, list[dict[str, Any]]] = {}
        for c in self.components:
            out[c] = [row for f in sorted(self.capture_dir.glob(f"{c}-*.jsonl")) for row in self._read_file(f)]
        return out


def read_capture(capture_dir: Path, components: Iterable[str]) -> dict[str, list[dict[str, Any]]]:
    """One read of the capture files; a caller that polls keeps a CaptureReader instead."""
    return CaptureReader(capture_dir, components).read()


def run_local(
    topology_file: str | Path,
    args: Sequence[str] = (),
    *,
    home: Path,
    name: str | None = None,
    containers: int | None = None,
    capture: Sequence[str] = (),
    until: Callable[[dict[str, list[dict[str, Any]]]], bool] | None = None,
    timeout: float = 60.0,
    properties: dict[str, str] | None = None,
    keep_running: bool = False,
    cluster: str = "local",
    env: Mapping[str, str] | None = None,
    submit_args: Sequence[str] = (),
) -> LocalRun:
    """Submits ``topology_file`` with ``heron-py submit CLUSTER`` (local by default; ``env`` adds
    to the environment, e.g. a Slurm cluster's ``HERON_PY_ZK``), waits until ``until(received)``
    is true (or ``timeout``: AssertionError), then kills the topology unless ``keep_running``.
    ``received`` maps each captured component to the tuples its tasks received (the capture
    files are written where the home is: shared by every host of a cluster)."""
    capture_dir = home / "capture" / (name or Path(topology_file).stem)
    props = dict(properties or {})
    if capture:
        props[cfgkeys.CAPTURE_DIR] = str(capture_dir)
        props[cfgkeys.CAPTURE_COMPONENTS] = ",".join(capture)
    cmd = ["submit", cluster, *submit_args]
    if name:
        cmd += ["--name", name]
    if containers is not None:
        cmd += ["--containers", str(containers)]
    for k, v in props.items():
        cmd += ["--config-property", f"{k}={v}"]
    cmd += [str(topology_file), *args]
    proc = _cli(home, *cmd, env=env)
    if proc.returncode != 0:
        raise AssertionError(f"heron-py submit failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    topo_name = name or proc.stdout.split("'")[1]
    run = LocalRun(topo_name, home, submit_output=proc.stdout)
    reader = CaptureReader(capture_dir, capture)
    try:
        deadline = time.monotonic() + timeout
        while True:
            run.received = reader.read()
            if until is None or until(run.received):
                break
            if time.monotonic() > deadline:
                sizes = {c: len(v) for c, v in run.received.items()}
                raise AssertionError(f"topology '{topo_name}': condition not met within {timeout:g} s "
                                     f"(captured tuples per component: {sizes}){_no_files(capture_dir, capture)}")
            time.sleep(0.2)
    finally:
        if not keep_running:
            kill_local(home, topo_name, cluster=cluster, env=env)
    return run


def _no_files(capture_dir: Path, capture: Sequence[str]) -> str:
    """What to say of captured names no task wrote a file for: perhaps no component bears them
    (a Streamlet streamlet fused into another component has none of its own)."""
    missing = [c for c in capture if not any(capture_dir.glob(f"{c}-*.jsonl"))]
    if not missing:
        return ""
    return (f"; no task wrote a capture file for {', '.join(map(repr, missing))}: expected component names "
            f"(a Streamlet program's operators fused into one task are one component named after them, "
            f"such as 'generator-1__flatmap-1'; config.set_fusion(False) keeps a component per streamlet)")


def kill_local(home: Path, name: str, *, cluster: str = "local", env: Mapping[str, str] | None = None) -> None:
    proc = _cli(home, "kill", cluster, name, env=env)
    if proc.returncode != 0:
        raise AssertionError(f"heron-py kill failed: {proc.stdout}\n{proc.stderr}")
