import sys
from pathlib import Path

import pytest

from tests.slurmcluster import slurm_cluster  # noqa: F401  (session fixture: a real Slurm cluster)

# other projects' files kept unchanged as test inputs (Heron's examples, Storm's adapters, a
# streamparse project): never collected as tests of ours
collect_ignore = ["heron_examples", "multilang"]

ROOT = Path(__file__).resolve().parent.parent
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
