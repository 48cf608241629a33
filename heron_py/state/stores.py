"""The state store a config names, opened: the one module that knows every backend.

It sits above them: zookeeper imports the config it is opened with (heron_py.state.config) and
the config imports no backend, so choosing one is no import cycle (it was, while the config
chose: config ↔ zookeeper).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from heron_py.state.base import StateManager, StateManagerError
from heron_py.state.config import StateConfig, resolve
from heron_py.state.localfs import LocalFsStateManager, private_home


def open_state(cfg: StateConfig, home: Path | None = None) -> StateManager:
    """The state manager ``cfg`` names, once the heron home is checked to be this user's alone
    (every process opens its store here at start: the CLI, the executors, the daemons); the
    home holds the logs whichever store holds the state."""
    private_home(home)
    if cfg.kind == "zookeeper":
        # imported when chosen: kazoo is a cost every localfs process would pay otherwise
        from heron_py.state.zookeeper import ZkStateManager

        return ZkStateManager(cfg, home)
    return LocalFsStateManager(home)


def run_with_state(args: argparse.Namespace, log: Any, make: Callable[[StateManager], Any]) -> int:
    """A daemon's main: opens the state manager the arguments choose (an unreachable store is
    one logged error and exit code 2, as is a StateManagerError from ``make``), runs the daemon
    ``make(state)`` builds, closes the store."""
    # imported here: the daemons' run loop brings asyncio, which the CLI (it opens stores through
    # this module too) does not load
    from heron_py.common.daemon import run_daemon

    try:
        state = open_state(resolve(args, home=args.home), args.home)
    except StateManagerError as e:
        log.error("%s", e)
        return 2
    try:
        try:
            daemon = make(state)
        except StateManagerError as e:  # what it read there was refused (a document not signed)
            log.error("%s", e)
            return 2
        code: int = run_daemon(daemon, log)
        return code
    finally:
        state.close()
