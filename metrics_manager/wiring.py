"""The metrics manager's composition root: its parts, built once, each given what it needs
explicitly (tests/unit/project/test_structure.py checks ``build``). The daemon (main.py) gives
them what is its own through ``Events``: the reports that come in, and its counts of what it
refused, which the store exports beside the container's reports."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from heron_py.common.framing import HEADER_SIZE, MsgType
from heron_py.common.net import Connection, Routes, on_raw
from metrics_manager.store import MetricsStore

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry


class Events(Protocol):
    """What the parts tell the metrics manager, or ask it."""

    def on_report(self, raw: bytes, peer: str) -> None: ...
    def own_counters(self) -> dict[str, float]: ...


@dataclass(frozen=True)
class Parts:
    store: MetricsStore  # the latest report of each process
    routes: Routes  # what each peer role may send
    registry: CollectorRegistry  # the Prometheus endpoint's, read from the store at each scrape


class ReportRoutes:
    """Reports come from the container's instances, its stream manager and a topology master
    running in it (the active one or the standby); any other message,
    or any role, is refused by the connection (counted, one line, closed)."""

    def __init__(self, events: Events) -> None:
        self._events = events
        self.routes = Routes("metricsmgr", [on_raw("instance", MsgType.METRICS_REPORT, self.report),
                                            on_raw("stmgr", MsgType.METRICS_REPORT, self.report),
                                            on_raw("tmanager", MsgType.METRICS_REPORT, self.report)])

    def report(self, conn: Connection, frame: bytes) -> None:
        self._events.on_report(bytes(frame[HEADER_SIZE:]), conn.peer_name)


def build(topology: str, container: int, events: Events, logs: Path) -> Parts:
    """Every part; none needs the topology's config, so they exist before it is read."""
    # prometheus-client, once a metrics manager is made
    from metrics_manager.prom import autoscale_collector, registry_for

    store = MetricsStore(topology, container, own=events.own_counters)
    # registry_for takes a getter of the store (its tests fill one they hand it); this one is
    # the store just made, never replaced (the one lambda kept here: test_structure.py lists it)
    return Parts(store=store, routes=ReportRoutes(events).routes,
                 registry=registry_for(lambda: store, autoscale_collector(topology, container, logs)))
