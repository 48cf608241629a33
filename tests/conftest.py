import sys
from pathlib import Path

import pytest

from tests.slurmcluster import slurm_cluster  # noqa: F401  (session fixture: a real Slurm cluster)

# other projects' files kept unchanged as test inputs (Heron's examples, Storm's adapters, a
# streamparse project): never collected as tests of ours
collect_ignore = ["heron_examples", "multilang"]

ROOT = Path(__file__).resolve().parent.parent

# pytest-xdist (`-n 2 --dist loadgroup`, as scripts/test.sh runs the suite): each test goes to a
# worker with its group. Tests sharing a session-wide service run in one group, so it is started
# once and never twice at the same time (one Slurm cluster: its namespaces and bridge have fixed
# names; one ZooKeeper JVM; one SparkSession; RabbitMQ's nodes share the host's epmd); the chaos
# runs, which load both cores, go together; every other test stays with its module, so a
# module-scoped fixture (a running topology, a broker) is built once.
_SHARED_FIXTURES = (("slurm_cluster", "slurm"), ("zk_server", "zookeeper"), ("spark", "spark"))


def xdist_group_of(nodeid: str, fixturenames: tuple[str, ...] | list[str]) -> str:
    """The group a test runs in under ``--dist loadgroup`` (pure: tests/unit/project/test_xdist_groups.py)."""
    for fixture, group in _SHARED_FIXTURES:
        if fixture in fixturenames:
            return group
    path = nodeid.split("::", 1)[0]
    if path.startswith("tests/chaos/"):
        return "chaos"
    if "rabbitmq" in path:
        return "rabbitmq"
    if path.startswith("tests/spark/"):
        return "spark"
    return path


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook, which reads the marker into the node id
def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(xdist_group_of(item.nodeid, item.fixturenames)))
EXAMPLES = ROOT / "examples"
# the examples import sibling modules (wc_common); tests import them the same way
sys.path.insert(0, str(EXAMPLES))


@pytest.fixture
def heron_home(tmp_path, monkeypatch):
    """A private $HERON_PY_HOME; any topology a test leaves running is killed afterwards."""
    home = tmp_path / "heron-home"
    home.mkdir()
    monkeypatch.setenv("HERON_PY_HOME", str(home))
    yield home
    from heron_py.scheduler.local import LocalScheduler
    from heron_py.state import StateManagerError, open_state
    from heron_py.state import config as statecfg

    # the state manager the test used (a zk test sets it in the environment)
    try:
        state = open_state(statecfg.resolve(home=home), home)
    except StateManagerError:
        return  # a test of an unreachable store: nothing could have been submitted
    try:
        for name in state.list_topologies():
            LocalScheduler(state, home).kill(name)
            state.delete_topology(name)
    finally:
        state.close()



@pytest.fixture(scope="session")
def zk_server(tmp_path_factory):
    """A real ZooKeeper server for the whole test session (JVM start costs seconds)."""
    from tests.zkserver import ZK_SERVER, ZkServer

    if not ZK_SERVER.exists():
        pytest.fail(f"{ZK_SERVER} is missing: apt-get install -y zookeeper (.ci/run does)")
    server = ZkServer(tmp_path_factory.mktemp("zookeeper"))
    server.start()
    yield server
    server.stop()


@pytest.fixture
def zk(zk_server, request, monkeypatch, tmp_path):
    """The ZooKeeper server with a chroot of this test's own; daemons and the CLI use it via
    the environment. If a test stopped the server, it is started again before the next."""
    import re

    if not zk_server.ruok():
        zk_server.start()
    chroot = "/t-" + re.sub(r"[^A-Za-z0-9_-]", "_", request.node.name)[:60]
    monkeypatch.setenv("HERON_PY_STATE_MANAGER", "zookeeper")
    monkeypatch.setenv("HERON_PY_ZK", zk_server.hosts + chroot)
    # heron-py's ZooKeeper credential: this test's own, never the user's ~/.heron-py/zk.auth
    monkeypatch.setenv("HERON_PY_ZK_AUTH_FILE", str(tmp_path / "zk.auth"))
    return zk_server, zk_server.hosts + chroot
