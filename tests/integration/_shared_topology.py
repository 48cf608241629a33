"""A real topology that several tests of one module observe (issue 40): launched once by a
module-scoped fixture, in a home of its own, and killed at the fixture's teardown unless a test
(the module's last, named so) already killed it.

Each launch of a 2-container topology costs seconds of process start-up and shut-down; tests
that only read a running topology (captured tuples, processes, HTTP endpoints, logs) lose
nothing by reading the same one. Tests whose property is a launch-time option keep their own
launch."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from heron_py.state import LocalFsStateManager
from heron_py.testing.local import CaptureReader, LocalRun, kill_local, run_local

Received = dict[str, list[dict[str, Any]]]


def capture_dir(home: Path, topology_file: Path, name: str | None) -> Path:
    """Where run_local has the captured components write (its own rule: the name, or the file's stem)."""
    return home / "capture" / (name or topology_file.stem)


def wait_received(run: LocalRun, folder: Path, components: Sequence[str], until: Callable[[Received], bool],
                  timeout: float) -> Received:
    """Reads the capture into ``run.received`` until ``until`` holds; AssertionError naming the
    topology and the tuples seen per component after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    reader = CaptureReader(folder, components)  # each poll parses only what was appended
    while True:
        run.received = reader.read()
        if until(run.received):
            return run.received
        if time.monotonic() > deadline:
            sizes = {c: len(v) for c, v in run.received.items()}
            raise AssertionError(f"topology '{run.name}': condition not met within {timeout:g} s "
                                 f"(captured tuples per component: {sizes})")
        time.sleep(0.2)


def is_running(home: Path, name: str) -> bool:
    return LocalFsStateManager(home).get_topology(name) is not None


@contextmanager
def running(home: Path, topology_file: Path, args: Sequence[str] = (), *, name: str | None = None,
            capture: Sequence[str] = (), until: Callable[[Received], bool] | None = None, timeout: float = 60.0,
            **launch: Any) -> Iterator[LocalRun]:
    """Submits ``topology_file`` (run_local's keyword arguments in ``launch``), waits for
    ``until`` over the captured tuples, yields the run and kills the topology afterwards if it
    still runs. The wait is here rather than in run_local because run_local leaves a topology
    that misses its condition running when asked to keep it: here a failed wait kills it too."""
    run = run_local(topology_file, args, home=home, name=name, capture=capture, keep_running=True, **launch)
    try:
        if until is not None:
            wait_received(run, capture_dir(home, topology_file, name), capture, until, timeout)
        yield run
    finally:
        if is_running(home, run.name):
            kill_local(home, run.name)
