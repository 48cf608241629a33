"""A pod's readiness probe: ready once this container's stream manager is registered with the
topology master, i.e. the physical plan in the state manager lists it at this pod's address
and the port its stream manager bound (so a registration of the pod's predecessor, at
another address, does not count). Exit code 0 when ready, 1 with the reason otherwise.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
from pathlib import Path

from heron_py.common.container_layout import TopologyPaths
from heron_py.planner.model import PhysicalPlan
from heron_py.scheduler.kube_render import OFFSET_ENV, container_index
from heron_py.state import StateManagerError, open_state
from heron_py.state import config as statecfg


def registered(plan: PhysicalPlan | None, container: int, host: str, port: int) -> bool:
    """Whether ``plan`` holds container's stream manager at host:port (pure)."""
    if plan is None:
        return False
    return any(s.container == container and s.host == host and s.port == port for s in plan.stmgrs)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="heron_py.scheduler.kube_probe")
    ap.add_argument("--topology", required=True)
    ap.add_argument("--home", type=Path, required=True)
    statecfg.add_arguments(ap)
    args = ap.parse_args(argv)
    k = container_index(os.environ.get("HOSTNAME") or socket.gethostname(), int(os.environ.get(OFFSET_ENV, "0")))
    port_file = TopologyPaths.of(args.topology, args.home).layout(k).stmgr_port
    try:
        port = int(port_file.read_text().strip())
    except (OSError, ValueError):
        print(f"container {k}: the stream manager has not bound its port yet ({port_file})")
        return 1
    try:
        state = open_state(statecfg.resolve(args, home=args.home), args.home)
    except StateManagerError as e:
        print(f"container {k}: {e}")
        return 1
    try:
        plan = state.get_physical_plan(args.topology)
    finally:
        state.close()
    host = os.environ.get("POD_IP", "")
    if not registered(plan, k, host, port):
        print(f"container {k}: stream manager {host}:{port} is not in the physical plan yet")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
