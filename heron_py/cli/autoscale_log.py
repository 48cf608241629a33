"""The health manager's record, ``logs/autoscale.jsonl`` in the topology's logs folder: one JSON
line per step of ``heron-py autoscale`` (written by ``AutoscaleLog``), read back by
``last_entries`` (``heron-py status`` shows the last one) and put in words by ``entry_lines``.
The master's web page and the metrics manager of container 0 read it too, through
heron_py/common/autoscale_record.py (the daemons' side of it: the file's name, its reading)."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from heron_py.common.autoscale_record import LOG_FILE as LOG_FILE  # re-exported: its writer names it here
from heron_py.common.autoscale_record import last_steps
from heron_py.common.container_layout import TopologyPaths

if TYPE_CHECKING:
    from heron_py.common.config import LogCaps


class AutoscaleLog:
    """Appends the steps to the file, its only writer, rotated by rename under the topology's
    log caps (as metrics.jsonl is); the file is the user's alone (0600), as every log is."""

    def __init__(self, path: Path, caps: LogCaps) -> None:
        self.path = path
        self.caps = caps

    def append(self, entry: Mapping[str, Any]) -> None:
        from heron_py.common.logrotate import open_log, rotate_by_rename

        rotate_by_rename(self.path, self.caps)
        with open_log(self.path) as f:
            f.write((json.dumps(entry, sort_keys=True) + "\n").encode())


def log_path(name: str, home: Path | None = None) -> Path:
    return TopologyPaths.of(name, home).logs / LOG_FILE


def last_entries(name: str, n: int, home: Path | None = None) -> list[dict[str, Any]]:
    """The last ``n`` steps of topology ``name``'s health manager, oldest first (from the
    rotated file too when the current one has fewer); a line being written is not one yet, nor
    is a line that is not a JSON object."""
    return last_steps(log_path(name, home), n)


def entry_lines(entry: Mapping[str, Any]) -> list[str]:
    """A step for people: its diagnoses, DS2's sizing, the action and what came of it."""
    when = time.strftime("%H:%M:%S", time.localtime(float(entry.get("time", 0.0))))
    if entry.get("decision") == "no observation":
        return [f"{when} no observation: {entry.get('error')}"]
    running = entry.get("parallelism", {})
    lines = [f"{when} window {float(entry.get('window_secs', 0)):g} s: "
             + ", ".join(f"{c} {n}" for c, n in running.items())
             + f"; sources {float(entry.get('throughput', 0.0)):,.0f} records/s"]
    lines += [f"  diagnosis: {d['explanation']}" for d in entry.get("diagnoses", [])]
    lines += [f"  sizing: {s['line']}" for s in entry.get("sizing", [])]
    action, outcome = entry.get("action", {}), entry.get("outcome")
    if action.get("kind") == "scale":
        moves = ", ".join(f"{c} {running.get(c, '?')} -> {n}" for c, n in action["parallelism"].items())
        lines += [f"  action: scale {moves}", f"    why: {action['why']}"]
    elif action.get("kind") == "restart":
        lines += [f"  action: restart container {action['container']}", f"    why: {action['why']}"]
    else:
        lines.append(f"  no action: {action.get('why')}")
    if outcome is not None:
        lines.append("  dry run: not carried out" if outcome.get("dry_run") else
                     f"  done: {outcome.get('message')}" if outcome.get("ok") else f"  FAILED: {outcome.get('error')}")
    return lines
