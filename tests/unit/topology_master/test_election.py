"""The master's election (topology_master/election.py): the claim gate never loses a request,
and a "node vanished" event during a claim in flight makes the standby take over (issue 18,
defect 10)."""

import asyncio
import logging
import os
import threading
import time

from heron_py.state import TManagerLocation
from topology_master.election import ClaimGate, Election, Role, StateWorker


def test_a_claim_gate_never_loses_a_request():
    g = ClaimGate()
    assert g.request() and not g.request() and not g.request()
    assert g.done() is True  # one more claim for the requests made meanwhile
    assert g.request() and g.done() is False


OTHER = TManagerLocation("10.0.0.9", 9, 99, owner="other")


class _State:
    """The first claim reads the node while the old master still holds it, and returns only
    after the node vanished (its watch fired meanwhile)."""

    def __init__(self):
        self.calls = 0
        self.in_claim = threading.Event()
        self.release = threading.Event()
        self.watch = None

    def add_session_listener(self, listener):
        pass

    def watch_tmanager_location(self, name, callback):
        self.watch = callback
        return lambda: None

    def acquire_tmanager(self, name, loc):
        self.calls += 1
        if self.calls == 1:
            self.in_claim.set()
            self.release.wait(5)
            return OTHER
        return None

    def release_tmanager(self, name):
        pass


def test_a_node_vanished_during_a_claim_in_flight_makes_the_standby_take_over():
    async def run():
        state = _State()
        roles = []
        worker = StateWorker(logging.getLogger("t"))
        election = Election(state=state, worker=worker, topology="wc",
                            location=lambda: TManagerLocation("127.0.0.1", 1, os.getpid()),
                            loop=asyncio.get_running_loop(), on_role=lambda r, h: roles.append(r),
                            log=logging.getLogger("t"))
        election.start()
        await asyncio.to_thread(state.in_claim.wait, 5)
        state.watch(None)  # kazoo's thread: the old master's node is gone
        await asyncio.sleep(0.05)
        state.release.set()
        deadline = time.monotonic() + 5
        while election.role is not Role.ACTIVE and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        election.stop()
        worker.close()
        return roles, state.calls

    roles, calls = asyncio.run(run())
    assert roles == [Role.STANDBY, Role.ACTIVE] and calls == 2
