"""Admin commands from the CLI (activate, deactivate, status, restore), answered by the topology master.
Pure over a small view of the master, so the rules are testable without sockets."""

from __future__ import annotations

import json
from typing import Any, Protocol

from heron_py.checkpoint.operator import parse_restore
from heron_py.common.wire import ADMIN_RESCALE
from heron_py.planner.model import TopologyState
from proto import heron_py_pb2 as pb

# and "restore ID|clean" (heron_py/checkpoint/operator.py), and ADMIN_RESCALE, which main.py answers
# once the stored definition is read (rescaler.py)
COMMANDS = ("activate", "deactivate", "status")


class MasterControl(Protocol):
    @property
    def active(self) -> bool: ...
    def set_run_state(self, state: TopologyState) -> str: ...
    def status(self) -> dict[str, Any]: ...
    def restore(self, checkpoint_id: int | None) -> tuple[bool, str]: ...


class AdminCommands:
    def __init__(self, master: MasterControl, pid: int) -> None:
        self.master = master
        self.pid = pid
        self.last_run_state_message = ""

    def handle(self, command: str) -> pb.AdminResponse:
        m = self.master
        # a standby may say how things stand, but only the active master changes them
        if not m.active and command != "status":
            return pb.AdminResponse(ok=False, message=f"topology master pid {self.pid} is a standby; "
                                    f"send {command} to the active master (its location is in the state manager)")
        if command in ("activate", "deactivate"):
            return self._set_run_state(TopologyState.RUNNING if command == "activate" else TopologyState.PAUSED)
        if command == "status":
            return pb.AdminResponse(ok=True, status_json=json.dumps(m.status()).encode())
        if command.split(" ", 1)[0] == "restore":
            return self._restore(command)
        if command.split(" ", 1)[0] == ADMIN_RESCALE:  # main.py takes it to the rescaler; here only when there is none
            return pb.AdminResponse(ok=False, message="rescale: this master cannot rescale a live topology")
        return pb.AdminResponse(ok=False, message=f"unknown admin command {command!r}; expected one of "
                                f"{', '.join(COMMANDS)}")

    def _restore(self, command: str) -> pb.AdminResponse:
        """The operator's decision for a restore that found no loadable checkpoint (or any
        rollback they want): effectively once never starts clean on its own."""
        try:
            checkpoint_id = parse_restore(command)
        except ValueError as e:
            return pb.AdminResponse(ok=False, message=str(e))
        ok, message = self.master.restore(checkpoint_id)
        return pb.AdminResponse(ok=ok, message=message, status_json=json.dumps(self.master.status()).encode())

    def _set_run_state(self, state: TopologyState) -> pb.AdminResponse:
        """Says what really happened: applied (every stream manager has a plan with the state,
        and the state manager holds it) or pending with the reason; the status rides along so
        the CLI can wait for it."""
        self.last_run_state_message = self.master.set_run_state(state)
        return self.run_state_answer()

    def run_state_answer(self) -> pb.AdminResponse:
        """The answer to the last activate/deactivate as things stand now (main.py asks again
        once the plan carrying the state is stored)."""
        doc = self.master.status()
        pending = doc.get("pending_reason")
        message = self.last_run_state_message
        message += f"; pending: {pending}" if pending else "; applied on every stream manager"
        return pb.AdminResponse(ok=True, message=message, status_json=json.dumps(doc).encode())
