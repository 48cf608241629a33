"""``heron-py rebalance NAME -e COMPONENT=N [-w SECONDS]``: Storm's spelling of ``update``.

Storm's ``rebalance`` deactivates the topology for ``-w`` seconds (so tuples in flight drain),
rescales it and activates it again; ``-e`` names a component's new number of executors. Here it
is ``heron-py update`` with the same parallelism changes, whose live rescale deactivates the
spouts and drains by itself: ``-w`` is its drain limit (``update --drain-secs``). An
effectively-once topology, whose rescale does not drain (its restore of the newest checkpoint is
the cut), is deactivated for ``-w`` seconds first, as in Storm. Storm's ``-n`` number of
workers has no counterpart: a topology keeps its containers.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable


def add_parser(add_parser: Callable[..., argparse.ArgumentParser]) -> argparse.ArgumentParser:
    """Registers the verb with the ``add_parser(name, **kw)`` helper of heron_py/cli/main.py."""
    from heron_py.cli.main import _cluster_arg, _name_arg

    p = add_parser("rebalance", help="Storm's spelling of update: rebalance NAME -e COMPONENT=N")
    _cluster_arg(p)
    _name_arg(p)
    p.add_argument("-e", "--executor", dest="component_parallelism", action="append", required=True,
                   type=storm_executor, metavar="COMPONENT=N", help="a component's new parallelism (repeatable)")
    p.add_argument("-w", "--wait-time", type=float, default=0.0, metavar="SECONDS",
                   help="Storm's wait: how long tuples in flight may drain, the spouts deactivated, before the rescale")
    p.add_argument("--wait", type=float, default=60.0, metavar="SECONDS",
                   help="how long to wait for every task to run again")
    p.set_defaults(fn=cmd_rebalance)
    return p


def storm_executor(text: str) -> str:
    """Storm's ``COMPONENT=N`` as update's ``COMPONENT:N`` (parse_parallelism checks N)."""
    comp, sep, n = text.rpartition("=")
    return f"{comp}:{n}" if sep else text


def cmd_rebalance(args: argparse.Namespace) -> int:
    from heron_py.cli.admin import run_state_command
    from heron_py.cli.errors import SubmitError
    from heron_py.cli.main import _require, _state, cmd_update
    from heron_py.common.config import effectively_once

    args.drain_secs = args.wait_time if args.wait_time > 0 else None
    state = _state(args)
    _require(state, args.name)
    topo = state.get_topology(args.name)
    if args.wait_time <= 0 or topo is None or not effectively_once(topo.config):
        # live: the rescale itself deactivates the spouts and drains, for at most -w seconds
        return cmd_update(args)
    # effectively once does not drain (a restore is its cut): deactivated for -w seconds first, as
    # Storm does, and active again after
    ok, message = run_state_command(state, args.name, "deactivate", 10.0)
    if not ok:
        raise SubmitError(f"rebalance: {message}")
    time.sleep(args.wait_time)
    try:
        return cmd_update(args)
    finally:
        run_state_command(state, args.name, "activate", 10.0)
