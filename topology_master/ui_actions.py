"""Actions from the web page: activate, deactivate, restart a container, kill.

The transport (http_server.py) lets a request through only with the topology's bearer token,
on loopback too: a page anyone on the host can open must not stop the topology. Every action,
and every refused one, is logged in the master's log with its origin (the client's address).

activate and deactivate change the run state here, as the CLI's admin commands do. restart
and kill run the CLI itself (``heron-py restart|kill``), detached: they stop processes of the
master's own container, the master included, and must outlive it. Their output goes to
``ui-actions.log`` in the topology's log folder.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from heron_py.common.container_layout import CONTAINER_ENV, TOPOLOGY_ID_ENV, TopologyPaths
from heron_py.common.logrotate import open_log
from heron_py.planner.model import TopologyState

ACTIONS = ("activate", "deactivate", "restart", "kill")
ActionsCli = Callable[[str, "int | None"], None]  # runs heron-py restart|kill (action, container)


class ActionError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


class Control(Protocol):
    @property
    def active(self) -> bool: ...
    def set_run_state(self, state: TopologyState) -> str: ...


def check_action(action: str, query: Mapping[str, list[str]], containers: int) -> int | None:
    """The container a restart names (None for the other actions), or one clear error (pure)."""
    if action not in ACTIONS:
        raise ActionError(404, f"no action {action!r}; expected one of {', '.join(ACTIONS)}")
    if action != "restart":
        return None
    raw = query.get("container", [None])[0]
    try:
        k = int(raw) if raw is not None else -1
    except ValueError:
        k = -1
    if not 0 <= k < containers:
        raise ActionError(400, f"restart: expected a container parameter from 0 to {containers - 1}, found "
                               f"{'none' if raw is None else repr(raw)}")
    return k


def cli_command(action: str, cluster: str, topology: str, container: int | None, state_args: list[str]) -> list[str]:
    """The ``heron-py`` command line of a restart or kill (pure)."""
    cmd = [sys.executable, "-m", "heron_py.cli.main", action, cluster, topology, *state_args]
    return cmd + (["--container", str(container)] if container is not None else [])


class Actions:
    """Runs the page's actions. ``cli`` runs a restart or kill command line (detached)."""

    def __init__(self, master: Control, topology: str, containers: int, log: logging.Logger,
                 cli: ActionsCli) -> None:
        self.master, self.topology, self.containers, self.log, self.cli = master, topology, containers, log, cli

    def run(self, action: str, query: Mapping[str, list[str]], origin: str) -> str:
        try:
            container = check_action(action, query, self.containers)
            if not self.master.active:
                raise ActionError(409, f"this topology master (pid {os.getpid()}) is a standby; open the active "
                                       f"master's page (heron-py status shows it)")
        except ActionError as e:
            self.log.warning("web action %s from %s refused: %s", action, origin, e)
            raise
        self.log.info("web action %s%s from %s", action, "" if container is None else f" container {container}",
                      origin)
        if action == "activate":
            return self.master.set_run_state(TopologyState.RUNNING)
        if action == "deactivate":
            return self.master.set_run_state(TopologyState.PAUSED)
        self.cli(action, container)
        what = f"container {container} of " if container is not None else ""
        return f"{action} of {what}topology '{self.topology}' started (heron-py {action}; output in ui-actions.log)"


def detached_cli(topology: str, state_args: list[str], cluster_of: Callable[[], str],
                 log: logging.Logger) -> ActionsCli:
    """Runs ``heron-py restart|kill`` in a new session, from a thread (reading the cluster
    may block on the state manager)."""

    def start(action: str, container: int | None) -> None:
        def go() -> None:
            try:
                cmd = cli_command(action, cluster_of(), topology, container, state_args)
                # without the markers of this container's processes: kill and restart find
                # processes by them, and must not kill themselves
                env = {k: v for k, v in os.environ.items() if k not in (CONTAINER_ENV, TOPOLOGY_ID_ENV)}
                # beside the master's own log (the executor runs it in that folder's container)
                paths = TopologyPaths.of(topology)
                log_dir = paths.private(paths.logs)
                with open_log(log_dir / "ui-actions.log") as out:
                    subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env,
                                     start_new_session=True)
                log.info("web action %s: started %s", action, " ".join(cmd[1:]))
            except Exception as e:  # a thread's failure must reach the log
                log.error("web action %s failed to start: %s", action, e)

        threading.Thread(target=go, name=f"ui-{action}", daemon=True).start()

    return start


def scheduler_name(state: Any, topology: str) -> str:
    return str((state.get_scheduler_location(topology) or {}).get("scheduler", "local"))
