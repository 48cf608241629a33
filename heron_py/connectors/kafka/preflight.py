"""``submit --dry-run``: a warning per Kafka component whose brokers cannot be reached now.

A warning, not an error: at run time an unreachable broker is logged and retried with the
client's backoff, and a dry run may well be made away from the brokers. Only a TCP connect is
tried (no Kafka client needed), each address once, with a short timeout.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterable
from typing import Any

from heron_py.common.config_codec import restore_config

Connect = Callable[[str, int, float], None]  # raises OSError when the address is not reachable


def _tcp_connect(host: str, port: int, timeout_s: float) -> None:
    socket.create_connection((host, port), timeout=timeout_s).close()


def bootstrap_servers(components: Iterable[Any]) -> list[tuple[str, str]]:
    """(component name, kafka.bootstrap.servers) of each component that has the option."""
    out = []
    for c in components:
        servers = restore_config(c.config).get("kafka.bootstrap.servers")
        if isinstance(servers, (list, tuple)):
            servers = ",".join(str(s) for s in servers)
        if isinstance(servers, str) and servers.strip():
            out.append((c.name, servers))
    return out


def broker_warnings(topology: Any, connect: Connect = _tcp_connect, timeout_s: float = 2.0) -> list[str]:
    """One line per component none of whose bootstrap servers accepts a connection."""
    lines: list[str] = []
    tried: dict[str, str | None] = {}  # address → the error, None when reachable
    for name, servers in bootstrap_servers(topology.components):
        errors = []
        for addr in (a.strip() for a in servers.split(",") if a.strip()):
            if addr not in tried:
                host, _, port = addr.rpartition(":")
                try:
                    connect(host.strip("[]") or "localhost", int(port), timeout_s)
                    tried[addr] = None
                except (OSError, ValueError) as e:
                    tried[addr] = str(e) or type(e).__name__
            if tried[addr] is None:
                break
            errors.append(f"{addr} ({tried[addr]})")
        else:
            lines.append(f"component '{name}': kafka.bootstrap.servers: no broker reachable: {', '.join(errors)}; "
                         f"the task will retry with backoff once running")
    return lines
