"""``heron-py rebalance NAME -e COMPONENT=N [-w SECONDS]``: Storm's spelling of ``update``.

Storm's ``rebalance`` deactivates the topology for ``-w`` seconds (so tuples in flight drain),
rescales it and activates it again; ``-e`` names a component's new number of executors. Here it
is ``heron-py update`` with the same parallelism changes (Storm's ``-n`` number of workers has
no counterpart: a topology keeps its containers).
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
                   help="Storm's wait: the topology is deactivated this long before it is rescaled")
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

    if args.wait_time <= 0:
        return cmd_update(args)
    state = _state(args)
    _require(state, args.name)
    # deactivated for -w seconds first, so tuples in flight drain; active again after
    ok, message = run_state_command(state, args.name, "deactivate", 10.0)
    if not ok:
        raise SubmitError(f"rebalance: {message}")
    time.sleep(args.wait_time)
    try:
        return cmd_update(args)
    finally:
        run_state_command(state, args.name, "activate", 10.0)
