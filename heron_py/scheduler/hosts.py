"""The address a container binds and advertises (``heron.network.bind.host``).

A scheduler gives each executor an address, or ``auto``: the address of the interface this
host uses to reach the state manager's ZooKeeper. That is the one the other containers can
reach too, since they all talk to the same ZooKeeper, and it needs no name service (cluster
nodes often cannot resolve each other's names). A UDP "connect" sends no packet; it only
asks the kernel for the route.
"""

from __future__ import annotations

import socket

from heron_py.state import StateConfig

AUTO = "auto"
LOOPBACK = "127.0.0.1"


class HostError(Exception):
    pass


def zk_endpoints(state_config: StateConfig) -> list[tuple[str, int]]:
    out = []
    for part in state_config.zk_hosts.split(","):
        host, _, port = part.strip().rpartition(":")
        if host and port.isdigit():
            out.append((host.strip("[]"), int(port)))
    return out


def route_source(host: str, port: int) -> str:
    """The local address the kernel would use to reach ``host:port``."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_DGRAM) as s:
        s.connect((host, port))
        addr: str = s.getsockname()[0]
        return addr


def resolve_host(spec: str, state_config: StateConfig) -> str:
    """An address to bind and advertise, from a scheduler's ``--host`` value."""
    if spec != AUTO:
        return spec
    if state_config.kind != "zookeeper":
        return LOOPBACK  # localfs: every container is on this host
    errors = []
    for host, port in zk_endpoints(state_config):
        try:
            return route_source(host, port)
        except OSError as e:
            errors.append(f"{host}:{port}: {e}")
    raise HostError(f"--host auto: no route to any ZooKeeper server of {state_config.zk_hosts!r} "
                    f"({'; '.join(errors) or 'no servers'}); give the address to bind with --host ADDRESS")
