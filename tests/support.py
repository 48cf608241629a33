"""Helpers the integration tests share: waiting for a condition, running the CLI."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
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


def run_cli(home: Path, *args: str, timeout: float = 180, **env: str) -> subprocess.CompletedProcess[str]:
    """``heron-py ARGS`` with ``$HERON_PY_HOME`` = ``home`` (and any extra environment)."""
    return subprocess.run([sys.executable, "-m", "heron_py.cli.main", *args], text=True, capture_output=True,
                          env={**os.environ, "HERON_PY_HOME": str(home), **env}, timeout=timeout)
