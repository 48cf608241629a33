"""``heron-py restore NAME --checkpoint ID | --clean``: the operator's decision for an
effectively-once topology.

A restore that can load no checkpoint never falls back to a clean start on its own (that would
drop the topology's state for good): the topology master waits, shows "waiting for the operator"
in ``status`` and on the web page, and this command tells it which checkpoint to restore, or to
start clean. It works in any state after the first start (a rollback to an older checkpoint).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from heron_py.cli.errors import AdminError

if TYPE_CHECKING:  # imported where used: the CLI's other verbs do not load the admin client
    from heron_py.state import StateManager
    from proto import heron_py_pb2 as pb

Send = Callable[["StateManager", str, str], "pb.AdminResponse"]


def add_parser(add_parser: Callable[..., argparse.ArgumentParser]) -> argparse.ArgumentParser:
    """Registers the verb with the ``add_parser(name, **kw)`` helper of heron_py/cli/main.py."""
    p = add_parser("restore", help="effectively once: restore a checkpoint (or start clean) when a restore "
                                   "waits for the operator")
    p.add_argument("name", metavar="NAME", help="the topology's name (heron-py list CLUSTER shows them)")
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--checkpoint", type=_checkpoint_id, metavar="ID",
                       help="a complete checkpoint's id (heron-py status NAME --json lists them)")
    which.add_argument("--clean", action="store_true", help="drop every task's state and start from empty state")
    p.set_defaults(fn=cmd_restore)
    return p


def _checkpoint_id(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a checkpoint id (an int > 0), found {text!r}")
    return int(text)


def run_restore(state: StateManager, name: str, checkpoint_id: int | None, *,
                send: Send | None = None) -> tuple[bool, str]:
    """Sends the decision to the active master; returns (accepted, what to print)."""
    from heron_py.checkpoint.operator import restore_command
    from heron_py.cli.admin import admin_command

    send = send or admin_command
    try:
        resp = send(state, name, restore_command(checkpoint_id))
    except AdminError as e:
        return False, str(e)
    message = resp.message
    if resp.ok and resp.status_json:
        doc: dict[str, Any] = json.loads(resp.status_json)
        ck = doc.get("checkpoints") or {}
        if ck.get("state"):
            message += f"; checkpoints: {ck['state']}"
    return resp.ok, message


def cmd_restore(args: argparse.Namespace) -> int:
    from heron_py.cli.main import _require, _state

    state = _state(args)
    _require(state, args.name)
    ok, message = run_restore(state, args.name, None if args.clean else args.checkpoint)
    print(message)
    return 0 if ok else 1
