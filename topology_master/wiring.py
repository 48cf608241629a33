"""The topology master's composition root: its parts, built in two steps, each given what it
needs explicitly: constructor arguments, bound methods of parts made before it, and the daemon
itself as ``Master`` (what it decides over several parts). No closure reads an attribute
assigned later and no part's attribute is set from here after it is made
(tests/unit/project/test_structure.py checks ``build`` and ``build_active``).

- ``build``, once ``TopologyMaster.start`` read the topology's definition and packing plan:
  the election and the master's ``Standing`` (is it the active one), the plan book, the plan
  store, the stream managers' links, the relauncher, the web page's actions and the live
  rescale's driver.
- ``build_active``, each time this master becomes the active one (it won the election and read
  the stored plan): effectively once's checkpoint driver, for the election's epoch.

What needs no topology (the counters, the state worker, the metrics view, the admin commands)
is the daemon's own, made in its ``__init__``; the listeners are its ``start``'s (their handler
and the HTTP API take the daemon).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import time
from collections.abc import Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from heron_py.common.config import LOST_AFTER, METRICS, RELAUNCH, LinkConfig
from heron_py.common.container_layout import CONTAINER_ENV, TopologyPaths
from heron_py.common.handshake import PeerIdentity
from heron_py.common.metrics_link import MetricsLink
from heron_py.planner.model import PackingPlan, TopologyDef
from heron_py.state import StateManager, TManagerLocation
from topology_master.checkpoint_store import StateRecords
from topology_master.checkpoints import CheckpointDriver, driver_for
from topology_master.election import Election, Role, Standing, StateWorker
from topology_master.health import ContainerHealth, HealthConfig
from topology_master.plan_book import PlanBook
from topology_master.plan_store import PlanStore
from topology_master.relauncher import Relaunch, Relauncher
from topology_master.rescale import LiveRescale
from topology_master.rescaler import Rescaler
from topology_master.stmgrs import StmgrLinks
from topology_master.ui_actions import Actions, ActionsCli, Control

LOOPBACK = "127.0.0.1"  # a container's metrics manager listens on loopback only


class Master(Control, Protocol):
    """What the parts tell the master daemon, or ask it."""

    def location(self) -> TManagerLocation: ...
    def on_role(self, role: Role, holder: TManagerLocation | None) -> None: ...
    def execution_state_changed(self) -> None: ...
    def metrics_report(self) -> dict[str, Any]: ...
    def spawn(self, coro: Coroutine[Any, Any, None]) -> None: ...
    def definition_switched(self, topo: TopologyDef, packing: PackingPlan) -> None: ...
    checkpoints: CheckpointDriver | None  # effectively once's driver while active


@dataclass(frozen=True)
class Site:
    """Which topology this master is for and what it was started with: fixed for the life of
    the process."""

    topology: str
    state: StateManager
    log: logging.Logger
    home: Path  # the heron home: effectively once's checkpoints are under it unless the topology names a folder
    checkpoint_key: bytes  # checkpoint files are signed under it
    relaunch: Relaunch | None  # asks the topology's scheduler to relaunch a lost container
    ui_cli: ActionsCli | None  # runs the web page's restart and kill (heron-py, detached)
    secret: bytes  # the topology's: the link to the container's metrics manager proves it


@dataclass(frozen=True)
class Parts:
    election: Election
    standing: Standing
    book: PlanBook
    plans: PlanStore
    links: StmgrLinks
    relauncher: Relauncher | None  # when the topology relaunches lost containers and a scheduler can
    actions: Actions | None  # when the web page may run heron-py
    rescaler: Rescaler  # a live rescale's steps (heron-py update)
    # the master's own metrics (effectively once's failing and waiting-for-the-operator) to its
    # container's metrics manager, so Prometheus has them; None outside a container (tests)
    metrics_link: MetricsLink | None


def build(site: Site, topo: TopologyDef, packing: PackingPlan, master: Master, *, worker: StateWorker,
          loop: asyncio.AbstractEventLoop, link_config: LinkConfig) -> Parts:
    """The parts of a master of ``topo``, in the order each one's needs exist; none runs yet
    (``TopologyMaster.start`` starts the election and the relauncher once it listens)."""
    log, topology = site.log, site.topology
    election = Election(state=site.state, worker=worker, topology=topology, location=master.location, loop=loop,
                        on_role=master.on_role, log=log)
    standing = Standing(election)
    book = PlanBook(topology, topo, packing)
    plans = PlanStore(topology=topology, book=book, state=site.state, worker=worker, loop=loop,
                      changed=master.execution_state_changed, log=log)
    links = StmgrLinks(book, is_active=standing.is_active, store_plan=plans.store,
                       state_changed=master.execution_state_changed, log=log)
    relauncher = None
    own = os.environ.get(CONTAINER_ENV)  # this master's container, which it never relaunches
    if site.relaunch is not None and RELAUNCH.parse(topo.config):
        health = ContainerHealth(packing.num_containers, time.monotonic,
                                 HealthConfig(lost_after_s=LOST_AFTER.parse(topo.config)))
        relauncher = Relauncher(health, heard=links.last_heard, active=standing.is_active, relaunch=site.relaunch,
                                log=log, own_container=int(own) if own and own.isdigit() else None)
    actions = (Actions(master, topology, packing.num_containers, log, site.ui_cli)
               if site.ui_cli is not None else None)
    metrics_link = None
    if own is not None and own.isdigit():
        metrics_link = MetricsLink(
            mm_file=TopologyPaths.of(topology, site.home).layout(int(own)).metricsmgr, host=LOOPBACK,
            secret=site.secret, role="tmanager", peer_id=own, expect=PeerIdentity("metricsmgr", own), log=log,
            max_frame=link_config.max_frame, report=master.metrics_report, liveness=link_config.liveness,
            interval=functools.partial(METRICS.parse, dict(topo.config)))
    rescaler = Rescaler(topology=topology, secret=site.secret, state=site.state, book=book, links=links,
                        live=LiveRescale(time.monotonic), log=log, spawn=master.spawn,
                        switched=master.definition_switched, driver=lambda: master.checkpoints)
    return Parts(election=election, standing=standing, book=book, plans=plans, links=links, relauncher=relauncher,
                 actions=actions, rescaler=rescaler, metrics_link=metrics_link)


def build_active(site: Site, topo: TopologyDef, packing: PackingPlan, parts: Parts, master: Master, *,
                 epoch: int) -> CheckpointDriver | None:
    """Effectively once's checkpoint driver (None in the other modes) of a master that just
    became the active one, with the election's ``epoch``: checkpoint and restore ids come from
    it (never the wall clock), and the driver stops completing checkpoints as soon as this
    master's session is lost or a newer master took an epoch."""
    return driver_for(site.topology, topo, packing, site.home, log=site.log, send_all=parts.links.send_all,
                      epoch=epoch, session_ok=parts.standing.session_ok,
                      epoch_now=functools.partial(site.state.master_epoch, site.topology),
                      state_changed=master.execution_state_changed, secret=site.checkpoint_key,
                      records=StateRecords(site.state, site.topology))
