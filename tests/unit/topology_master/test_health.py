"""The topology master's rule for relaunching lost containers (topology_master/health.py)."""

from tests.fakes import ManualClock
from topology_master.health import ContainerHealth, HealthConfig

CFG = HealthConfig(lost_after_s=20, startup_grace_s=120, retry_after_s=60)


def test_a_container_silent_past_the_limit_is_relaunched_once_per_retry_interval():
    clock = ManualClock(1000.0)
    h = ContainerHealth(3, clock, CFG)
    h.seen([0, 1, 2])
    assert h.due() == []
    clock.now += 19.9
    h.seen([0, 2])
    assert h.due() == []
    clock.now += 0.1  # container 1: 20 s without its stream manager
    assert h.due() == [1]
    assert h.due() == []  # asked already
    clock.now += 59.9
    h.seen([0, 2])
    assert h.due() == []
    clock.now += 0.1  # still gone a minute after asking: ask again
    assert h.due() == [1]


def test_a_relaunched_container_that_comes_back_is_healthy_again():
    clock = ManualClock(1000.0)
    h = ContainerHealth(2, clock, CFG)
    h.seen([0, 1])
    clock.now += 25
    h.seen([0])
    assert h.due() == [1]
    clock.now += 10
    h.seen([0, 1])  # registered again from its new node
    clock.now += 15
    h.seen([0, 1])
    assert h.due() == []


def test_containers_never_seen_get_the_startup_grace():
    clock = ManualClock(1000.0)
    h = ContainerHealth(2, clock, CFG)
    assert h.due() == []  # this master starts watching now
    h.seen([0])
    clock.now += 119
    h.seen([0])
    assert h.due() == []
    clock.now += 1
    assert h.due() == [1]
