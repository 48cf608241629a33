"""Storm topology config keys → heron-py's (pure).

The Storm keys stay in the config as written (a component may read them, as in Storm); the
heron-py key each one means is added beside it unless the file already sets that key itself:

- topology.workers N → topology.stmgrs N: Storm's worker processes are heron-py's
  containers (one stream manager each), so ``--containers`` still overrides it.
- topology.acker.executors 0 → topology.reliability.mode ATMOST_ONCE: Storm turns acking
  off with no ackers. N > 0 → ATLEAST_ONCE (acking on, as in Storm, for spouts that emit
  with a message id). Unset: heron-py's default mode is kept (ATMOST_ONCE), since Storm's
  default of "one acker per worker" would silently switch tracking on for every file.
- topology.debug, topology.max.spout.pending, topology.message.timeout.secs: heron-py uses
  the same names and meanings, so nothing is added.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from heron_py.flux.errors import FluxError, type_name

STORM_WORKERS = "topology.workers"
STORM_ACKERS = "topology.acker.executors"
STMGRS = "topology.stmgrs"
RELIABILITY_MODE = "topology.reliability.mode"


def _count(file: str, key: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise FluxError(f"flux file {file}: config key '{key}': expected an integer >= {minimum}, "
                        f"found {type_name(value)} ({value!r})")
    return value


def translate_config(file: str, config: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(config)
    if STORM_WORKERS in config and STMGRS not in config:
        out[STMGRS] = _count(file, STORM_WORKERS, config[STORM_WORKERS], 1)
    if STORM_ACKERS in config and RELIABILITY_MODE not in config:
        ackers = _count(file, STORM_ACKERS, config[STORM_ACKERS], 0)
        out[RELIABILITY_MODE] = "ATLEAST_ONCE" if ackers > 0 else "ATMOST_ONCE"
    return out
