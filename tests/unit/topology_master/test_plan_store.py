"""The physical plan's write and what the plan book learns of it (issue 34: a deactivate whose
plan write failed was undone by the next master, silently): a failed write is reported pending
with its reason and tried again; a stored plan makes the state in effect."""

import asyncio
import logging

from heron_py.planner.model import TopologyState
from heron_py.state.localfs import LocalFsStateManager
from tests.fakes import plan_book, stmgr_location
from topology_master.election import StateWorker
from topology_master.plan_store import PlanStore


class FlakyState(LocalFsStateManager):
    """A real local state store whose first ``fail`` plan writes raise, as a ZooKeeper
    connection loss does."""

    def __init__(self, root, fail):
        super().__init__(root)
        self.fail = fail

    def set_physical_plan(self, name, plan):
        if self.fail:
            self.fail -= 1
            raise OSError("connection loss")
        super().set_physical_plan(name, plan)


async def test_a_failed_plan_write_is_pending_with_its_reason_then_retried_until_stored(tmp_path):
    book = plan_book(2)
    book.register(stmgr_location(0))
    book.register(stmgr_location(1))
    state = FlakyState(tmp_path, fail=2)
    worker = StateWorker(logging.getLogger("test"))
    changes = []
    store = PlanStore(topology="t", book=book, state=state, worker=worker, loop=asyncio.get_running_loop(),
                      changed=lambda: changes.append(book.pending_reason()), log=logging.getLogger("test"),
                      retry_s=0.05)
    book.set_run_state(TopologyState.PAUSED)
    plan = book.next_plan()
    store.store(plan)
    for _ in range(100):
        await asyncio.sleep(0.02)
        if book.stored_version == plan.version:
            break
    worker.close()
    assert changes[0] == ("plan v1 carrying it is not in the state manager yet (its write failed: OSError: "
                          "connection loss); a master taking over would not keep it")
    assert changes[-1] is None and book.pending_reason() is None
    assert state.get_physical_plan("t").state is TopologyState.PAUSED  # what a new master adopts
