"""Helpers the integration tests share: waiting for a condition, running the CLI."""

from __future__ import annotations

import asyncio
import errno
import os
import resource
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


def wait_for(cond: Callable[[], Any], timeout: float, what: str, every: float = 0.2) -> Any:
    """Polls ``cond`` until it returns something true (which is returned); AssertionError
    naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(every)


async def until(cond: Callable[[], Any], timeout: float, what: str = "the condition", every: float = 0.02) -> None:
    """``wait_for`` inside an event loop: polls ``cond`` on the loop's clock, sleeping
    between looks so the loop runs; AssertionError naming ``what`` after ``timeout`` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not cond():
        assert loop.time() < deadline, f"timed out after {timeout} s waiting for {what}"
        await asyncio.sleep(every)


def run_cli(home: Path, *args: str, timeout: float = 180, **env: str) -> subprocess.CompletedProcess[str]:
    """``heron-py ARGS`` with ``$HERON_PY_HOME`` = ``home`` (and any extra environment)."""
    return subprocess.run([sys.executable, "-m", "heron_py.cli.main", *args], text=True, capture_output=True,
                          env={**os.environ, "HERON_PY_HOME": str(home), **env}, timeout=timeout)


class Prometheus:
    """A real Prometheus (Debian's package) with a config of the test's, on a free loopback
    port, storing under ``folder``; ``query`` returns an instant query's single value."""

    def __init__(self, folder: Path, config_yaml: str) -> None:
        import shutil
        import socket

        binary = shutil.which("prometheus")
        if binary is None:
            raise AssertionError("the prometheus binary is missing: apt-get install -y prometheus "
                                 "(scripts/setup.sh does)")
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        (folder / "prometheus.yml").write_text(config_yaml)
        self._log = (folder / "prometheus.log").open("w")
        self._proc = subprocess.Popen([binary, f"--config.file={folder / 'prometheus.yml'}",
                                       f"--storage.tsdb.path={folder / 'data'}",
                                       f"--web.listen-address=127.0.0.1:{self.port}"],
                                      stdout=self._log, stderr=subprocess.STDOUT)

    def query(self, expr: str) -> float | None:
        import json
        import urllib.parse
        import urllib.request

        q = urllib.parse.urlencode({"query": expr})
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/api/v1/query?{q}", timeout=5) as r:
                res = json.loads(r.read())["data"]["result"]
        except (OSError, ValueError, KeyError):
            return None
        return float(res[0]["value"][1]) if res else None

    def close(self) -> None:
        self._proc.terminate()
        self._proc.wait(timeout=30)
        self._log.close()


def saved_tasks(storage: Any, topology: str, checkpoint_id: int) -> list[int]:
    """The tasks whose state ``storage`` holds for a checkpoint (a test's stand-in for the
    master's count of the tasks that reported saving state)."""
    from heron_py.checkpoint.redis_storage import RedisCheckpointStorage
    from heron_py.checkpoint.storage import LocalFsStorage
    from heron_py.testing.harness import MemoryStorage

    if isinstance(storage, LocalFsStorage):
        folder = storage.root / topology / str(checkpoint_id)
        return sorted(int(p.name) for p in folder.iterdir() if p.name.isdigit()) if folder.is_dir() else []
    if isinstance(storage, RedisCheckpointStorage):
        state = storage._keys(topology, checkpoint_id)[1]
        return sorted(int(f) for f in storage.client.hkeys(state) if f.isdigit())
    if isinstance(storage, MemoryStorage):
        return sorted(storage._data.get((topology, checkpoint_id), {}))
    raise TypeError(f"saved_tasks: unknown storage {type(storage).__name__}")


def mark_saved(storage: Any, topology: str, checkpoint_id: int) -> None:
    """Mark a checkpoint complete as the master would once every task of a test reported saving."""
    storage.mark_complete(topology, checkpoint_id, saved_tasks(storage, topology, checkpoint_id), {})


@contextmanager
def no_free_descriptors() -> Iterator[None]:
    """A real EMFILE: the descriptor limit lowered and used up for the duration."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    held: list[int] = []
    resource.setrlimit(resource.RLIMIT_NOFILE, (len(os.listdir("/proc/self/fd")) + 8, hard))
    try:
        try:
            while True:
                held.append(os.open("/dev/null", os.O_RDONLY))
        except OSError as e:
            assert e.errno == errno.EMFILE
        yield
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
