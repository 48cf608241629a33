"""Plan versions never go backwards across masters, even when the last plan a master pushed
never reached the state manager before it died (issue 18, defect 8)."""

import threading

import pytest

from heron_py.planner.model import PhysicalPlan, TopologyState
from heron_py.state.localfs import LocalFsStateManager
from tests.fakes import plan_book
from topology_master.plan_book import epoch_base


def _failover(state, pushed_by_a: int) -> tuple[int, int]:
    """Master A pushes ``pushed_by_a`` plans, only the first reaches the state manager (its
    later writes failed), A dies, B takes over. Returns (A's last version, B's first)."""
    a = plan_book()
    a.adopt(state.get_physical_plan("t"), state.next_master_epoch("t"))
    first = a.next_plan()
    state.set_physical_plan("t", first)
    for _ in range(pushed_by_a - 1):
        last = a.next_plan()  # pushed to the stream managers; the state write failed
    b = plan_book()
    b.adopt(state.get_physical_plan("t"), state.next_master_epoch("t"))
    return last.version, b.next_plan().version


def test_a_master_that_takes_over_after_a_failed_plan_write_pushes_a_newer_version(tmp_path):
    state = LocalFsStateManager(tmp_path)
    state.set_topology(plan_book().topology)
    a_last, b_first = _failover(state, pushed_by_a=5)
    # a stream manager that holds A's v5 ignores any plan <= 5: B's must be above it
    assert a_last == 5 and b_first > a_last


def test_the_first_master_counts_from_one_as_before(tmp_path):
    state = LocalFsStateManager(tmp_path)
    book = plan_book()
    book.adopt(None, state.next_master_epoch("t"))
    assert book.next_plan().version == 1
    assert epoch_base(1) == 0 and epoch_base(2) == 1 << 32


def test_localfs_epochs_are_unique_under_concurrent_masters(tmp_path):
    got: list[int] = []
    lock = threading.Lock()

    def take():
        st = LocalFsStateManager(tmp_path)
        for _ in range(20):
            e = st.next_master_epoch("t")
            with lock:
                got.append(e)

    threads = [threading.Thread(target=take) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(got) == list(range(1, 81))


def test_an_older_stored_plan_does_not_lower_the_epoch_floor():
    book = plan_book()
    book.adopt(PhysicalPlan(book.topology, book.packing, (), TopologyState.PAUSED, 7), epoch=3)
    assert book.run_state is TopologyState.PAUSED and book.next_plan().version == (2 << 32) + 1


@pytest.mark.integration
def test_zookeeper_epochs_are_a_compare_and_set_counter(zk):
    from heron_py.state.config import StateConfig, parse_zk
    from heron_py.state.zookeeper import ZkStateManager

    hosts, root = parse_zk(zk[1])
    cfg = StateConfig(kind="zookeeper", zk_hosts=hosts, zk_root=root)
    a, b = ZkStateManager(cfg), ZkStateManager(cfg)
    try:
        a.set_topology(plan_book().topology)
        a_last, b_first = _failover(a, pushed_by_a=4)
        assert b_first > a_last
        got: list[int] = []

        def take(st):
            for _ in range(10):
                got.append(st.next_master_epoch("t"))

        threads = [threading.Thread(target=take, args=(s,)) for s in (a, b)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(got) == list(range(3, 23))
    finally:
        a.close()
        b.close()
