"""Facts about the host a process runs on that every layer asks: where this user's heron-py
files live (the heron home) and whether an address is this host's alone (loopback).

They sit here, in the foundation, because the state stores, the schedulers, the CLI and the
daemons all need them: the daemons read them without reaching into a state backend or a
scheduler (tests/unit/project/test_structure.py's per-daemon allow-lists).
"""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path


def heron_home() -> Path:
    """The heron home: ``$HERON_PY_HOME``, else ~/.heron-py (its state, logs and keys; the
    check that it is its user's alone is the state store's, ``localfs.private_home``)."""
    return Path(os.environ.get("HERON_PY_HOME", str(Path.home() / ".heron-py")))


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address or ``localhost``) reaches this host only: a server bound
    there needs no token, and a link to it no TLS."""
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"
