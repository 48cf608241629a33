"""The master relaunches a container whose stream manager went silent, whether or not its
connection is still open (issue 34, item 2): a frozen process or a host gone without FIN keeps
the connection, only its heartbeats stop."""

from __future__ import annotations

import logging

from tests.fakes import ManualClock
from topology_master.health import ContainerHealth, HealthConfig
from topology_master.relauncher import Relauncher


def test_an_open_connection_without_heartbeats_is_lost_after_the_limit() -> None:
    clock = ManualClock(100.0)
    health = ContainerHealth(2, clock, HealthConfig(lost_after_s=20.0, startup_grace_s=120.0, retry_after_s=60.0))
    heard = {0: clock.t, 1: clock.t}
    r = Relauncher(health, heard=lambda: heard, active=lambda: True, relaunch=lambda c: None,
                   log=logging.getLogger("t"))
    assert r.tick() == []
    for _ in range(19):  # container 0 heartbeats every second; container 1, still connected, does not
        clock.t += 1.0
        heard[0] = clock.t
        assert r.tick() == []
    clock.t += 1.0
    heard[0] = clock.t
    assert r.tick() == [1]  # 20 s of silence: due, though nothing closed its connection
    clock.t += 1.0
    assert r.tick() == []  # asked once; again only after retry_after_s
    heard[1] = clock.t  # the relaunched one heartbeats: never due while it does
    for _ in range(70):
        clock.t += 1.0
        heard[0] = heard[1] = clock.t
        assert r.tick() == []


def test_an_older_heartbeat_time_never_moves_the_last_seen_back() -> None:
    clock = ManualClock(100.0)
    health = ContainerHealth(1, clock)
    health.heard(0, 50.0)
    health.heard(0, 40.0)
    assert health.last_seen[0] == 50.0
