"""The topology master's I/O for a live rescale: it reads the resized definition the CLI
stored, and carries out the steps rescale.py's ``LiveRescale`` decides (the drain plan and
request, the switch plan; effectively once, the switch and then the restore the master's
``switched`` orders). The protocol and its reasons are rescale.py's docstring."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any

from heron_py.common.config import RESCALE_DRAIN, TIMEOUT, ConfigError, effectively_once
from heron_py.common.wire import encode_msg
from heron_py.planner.model import PackingPlan, TopologyDef, TopologyState
from heron_py.state import StateManager, StateManagerError
from proto import heron_py_pb2 as pb
from topology_master.checkpoints import CheckpointDriver
from topology_master.plan_book import PlanBook
from topology_master.rescale import LiveRescale, Step
from topology_master.stmgrs import StmgrLinks

TICK_S = 0.02
# how long each stream manager waits with no tree open before it answers a drain
QUIET_MS = 50


class Rescaler:
    def __init__(self, *, topology: str, secret: bytes, state: StateManager, book: PlanBook, links: StmgrLinks,
                 live: LiveRescale, log: logging.Logger, spawn: Callable[[Coroutine[Any, Any, None]], None],
                 switched: Callable[[TopologyDef, PackingPlan], None],
                 driver: Callable[[], CheckpointDriver | None] = lambda: None) -> None:
        """``driver``: effectively once's checkpoint driver of the active master (None before it
        is active, and in the other modes): an effectively-once rescale ends in its restore."""
        self._topology = topology
        self._secret = secret
        self._state = state
        self._book = book
        self._links = links
        self.live = live
        self._log = log
        self._spawn = spawn
        self._switched = switched  # the master's own copies of the definition follow
        self._driver = driver

    async def request(self, drain_s: float | None = None) -> tuple[bool, str]:
        """The CLI's ``rescale``: the stored definition and packing, checked, start a rescale;
        ``drain_s`` (Storm's rebalance -w) in place of the topology's drain limit."""
        loop = asyncio.get_running_loop()
        try:
            topo, packing = await loop.run_in_executor(None, self._read)
        except StateManagerError as e:
            return False, f"rescale: {e}"
        if topo is None or packing is None:
            return False, f"rescale: topology '{self._topology}' has no definition or packing plan in the state manager"
        restore = effectively_once(topo.config)
        if restore:
            driver = self._driver()
            blocker = "this master is not active yet" if driver is None else driver.rescale_blocker()
            if blocker is not None:
                return False, f"rescale: topology '{self._topology}' is EFFECTIVELY_ONCE and {blocker}"
        try:
            limit = float(RESCALE_DRAIN.parse(topo.config)) if drain_s is None else drain_s
            drain_wait = min(float(TIMEOUT.parse(topo.config)), limit)
        except ConfigError as e:
            return False, f"rescale: {e}"
        why = self.live.begin(self._book.packing, topo, packing, drain_wait, restore=restore)
        if why is not None:
            return False, f"rescale: {why}"
        target = self.live.target
        assert target is not None
        self._book.staged = target.added
        self._log.info("live rescale: adding tasks %s, removing tasks %s; waiting for the added ones to connect",
                       sorted(target.added), sorted(target.removed))
        self._spawn(self._ticks())
        self.on_instances()  # nothing added (a shrink): the drain is due now
        return True, (f"rescale of '{self._topology}' under way: {len(target.added)} tasks added, "
                      f"{len(target.removed)} removed")

    def _read(self) -> tuple[TopologyDef | None, PackingPlan | None]:
        return self._state.get_topology(self._topology, self._secret), self._state.get_packing_plan(self._topology)

    def on_instances(self) -> None:
        # the tasks their stream managers report connected (a process, ready or not)
        connected = {t for t, i in self._book.instances.items() if i.get("pid")}
        self._act(self.live.on_instances(connected))

    def on_drained(self, msg: pb.Drained) -> None:
        self._act(self.live.on_drained(msg.container, msg.drain_id))

    async def _ticks(self) -> None:
        while self.live.busy:
            await asyncio.sleep(TICK_S)
            self._act(self.live.tick())

    def _act(self, step: Step | None) -> None:
        if step is Step.DRAIN:
            if self.live.note:
                self._log.warning("live rescale: %s", self.live.note)
            if self._book.run_state is TopologyState.RUNNING:
                self._links.push_plan(pause=True)
            self._links.send_all(encode_msg(pb.DrainRequest(drain_id=self.live.drain_id, quiet_ms=QUIET_MS)))
        elif step is Step.SWITCH:
            if self.live.note:
                self._log.warning("live rescale: %s", self.live.note)
            target = self.live.finish()
            self._book.switch(target.topology, target.packing)
            self._links.push_plan()
            self._switched(target.topology, target.packing)
            driver = self._driver()
            if self.live.restore and driver is not None:
                # behind the plan on every link: each task restores under the new plan
                tasks = {t.task_id: t.component for t in target.packing.tasks}
                driver.replan(tasks, f"plan v{self._book.version}, {len(tasks)} tasks")
            self._log.info("live rescale done: plan v%d has %d tasks", self._book.version, len(target.packing.tasks))

    def status(self) -> dict[str, Any] | None:
        target = self.live.target
        if target is None:
            return None
        return {"phase": self.live.phase.value, "added": sorted(target.added), "removed": sorted(target.removed)}
