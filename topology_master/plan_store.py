"""Writing the physical plan to the state manager, with what became of the write told back to
the plan book: a master taking over adopts the stored plan's run state, so a state is in effect
for good only once a plan carrying it is stored (plan_book.pending_reason says so otherwise).
A failed write is tried again after ``retry_s`` while its plan is still the newest."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from heron_py.planner.model import PhysicalPlan
from heron_py.state import StateManager
from topology_master.election import StateWorker
from topology_master.plan_book import PlanBook

RETRY_S = 1.0


class PlanStore:
    def __init__(self, *, topology: str, book: PlanBook, state: StateManager, worker: StateWorker,
                 loop: asyncio.AbstractEventLoop, changed: Callable[[], None], log: logging.Logger,
                 retry_s: float = RETRY_S) -> None:
        self._topology = topology
        self._book = book
        self._state = state
        self._worker = worker
        self._loop = loop
        self._changed = changed  # the execution state says what became of the write
        self._log = log
        self._retry_s = retry_s
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []  # (version, settled)

    def store(self, plan: PhysicalPlan) -> None:
        """Queues the write (the state worker keeps only the newest plan queued)."""

        def write() -> None:  # on the state worker's thread
            try:
                self._state.set_physical_plan(self._topology, plan)
            except Exception as e:
                self._loop.call_soon_threadsafe(self._failed, plan, f"{type(e).__name__}: {e}")
                raise  # the worker logs it
            self._loop.call_soon_threadsafe(self._stored, plan)

        self._worker.put_latest("pplan", write)

    async def settled(self, version: int, timeout: float) -> None:
        """Returns once the write of plan ``version`` (or of a newer one) succeeded or failed,
        or after ``timeout``: an answer that waits for it says what the state manager holds."""
        if self._book.stored_version >= version:
            return
        fut: asyncio.Future[None] = self._loop.create_future()
        self._waiters.append((version, fut))
        try:
            await asyncio.wait_for(asyncio.shield(fut), timeout)
        except TimeoutError:
            pass
        finally:
            self._waiters = [(v, f) for v, f in self._waiters if f is not fut]

    def _wake(self, version: int) -> None:
        for v, fut in self._waiters:
            if v <= version and not fut.done():
                fut.set_result(None)

    def _stored(self, plan: PhysicalPlan) -> None:
        self._book.plan_stored(plan.version)
        self._changed()
        self._wake(plan.version)

    def _failed(self, plan: PhysicalPlan, error: str) -> None:
        self._book.plan_store_failed(plan.version, error)
        self._changed()
        self._wake(plan.version)
        if self._book.pplan is plan:  # a newer plan has its own write queued
            self._log.warning("physical plan v%d not stored (%s); trying again in %g s", plan.version, error,
                              self._retry_s)
            self._loop.call_later(self._retry_s, self._retry, plan)

    def _retry(self, plan: PhysicalPlan) -> None:
        if self._book.pplan is plan and self._book.stored_version < plan.version:
            self.store(plan)
