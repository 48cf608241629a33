"""The ZooKeeper state manager against a real ZooKeeper server (Debian's package)."""

import asyncio
import json
import logging
import os
import socket
import threading
import time

import pytest
from kazoo.client import KazooClient

from heron_py.state import StateManagerError, TManagerLocation
from heron_py.state import config as statecfg
from heron_py.state.config import StateConfig, parse_zk
from heron_py.state.zookeeper import CHUNK, ZkStateManager
from tests.support import wait_for as _wait
from tests.zkserver import raw_client
from topology_master.election import Election, Role, StateWorker, next_role

pytestmark = pytest.mark.integration


def _cfg(zk, **kw):
    hosts, root = parse_zk(zk[1])
    return StateConfig(kind="zookeeper", zk_hosts=hosts, zk_root=root, **kw)




def test_layout_documents_and_large_packages(zk):
    st = ZkStateManager(_cfg(zk))
    try:
        root = st.root
        raw = raw_client(zk[0].hosts)
        raw.start()
        # Heron's layout under the root
        assert set(raw.get_children(root)) >= {"topologies", "packingplans", "pplans", "tmanagers",
                                                "executionstate", "schedulers", "locks"}
        st.set_execution_state("wc", {"state": "RUNNING", "n": 3})
        assert st.get_execution_state("wc") == {"state": "RUNNING", "n": 3}
        assert json.loads(raw.get(f"{root}/executionstate/wc")[0]) == {"n": 3, "state": "RUNNING"}
        # a package larger than a znode may hold is split into parts and comes back whole
        big = os.urandom(int(2.5 * CHUNK))
        st.set_package("wc", big)
        assert st.get_package("wc") == big
        assert sorted(raw.get_children(f"{root}/packages/wc")) == ["part-00000", "part-00001", "part-00002"]
        # a shorter value removes the parts it no longer needs
        small = os.urandom(CHUNK + 10)
        st.set_package("wc", small)
        assert st.get_package("wc") == small
        assert sorted(raw.get_children(f"{root}/packages/wc")) == ["part-00000", "part-00001"]
        st.set_secret("wc", b"s3cret")
        st.set_tls("wc", b'{"tls": "material"}')
        assert st.get_tls("wc") == b'{"tls": "material"}' and st.get_secret("wc") == b"s3cret"
        assert raw.get(f"{root}/tls/wc")[0] == b'{"tls": "material"}'
        st.set_scheduler_location("wc", {"scheduler": "local"})
        assert st.list_topologies() == []  # no topology definition yet
        st.delete_topology("wc")
        assert st.get_package("wc") is None and st.get_secret("wc") is None and st.get_tls("wc") is None
        assert raw.get_children(f"{root}/tls") == []
        assert raw.get_children(f"{root}/packages") == []
        raw.stop()
        raw.close()
    finally:
        st.close()


def test_tmanager_node_is_ephemeral_and_watched(zk):
    a = ZkStateManager(_cfg(zk))
    b = ZkStateManager(_cfg(zk))
    seen = []
    try:
        unwatch = b.watch_tmanager_location("wc", seen.append)
        _wait(lambda: seen == [None], 5, "the watch's first call")
        assert a.acquire_tmanager("wc", TManagerLocation("127.0.0.1", 1111, 11)) is None
        # acquiring again while holding it succeeds (idempotent) and refreshes the ports
        assert a.acquire_tmanager("wc", TManagerLocation("127.0.0.1", 1112, 11)) is None
        holder = b.acquire_tmanager("wc", TManagerLocation("127.0.0.1", 2222, 22))
        assert holder is not None and (holder.port, holder.pid, holder.owner) == (1112, 11, a.session_id)
        _wait(lambda: seen and seen[-1] is not None and seen[-1].port == 1112, 5, "the watch to see the holder")
        raw = raw_client(zk[0].hosts)
        raw.start()
        _, stat = raw.get(f"{a.root}/tmanagers/wc")
        assert stat.ephemeralOwner == a._zk.client_id[0]
        raw.stop()
        raw.close()
        a.close()  # the session ends: the node goes with it
        _wait(lambda: seen[-1] is None, 10, "the watch to see the node vanish")
        assert b.acquire_tmanager("wc", TManagerLocation("127.0.0.1", 2222, 22)) is None
        assert b.get_tmanager_location("wc").port == 2222
        unwatch()
    finally:
        a.close()
        b.close()


def _expire_session(zk_server, st):
    """Expires ``st``'s session for real: a second client joins it with the same id and
    password and closes it, which ends the session on the server (ZooKeeper's own trick)."""
    sid, pwd = st._zk.client_id
    twin = KazooClient(hosts=zk_server.hosts, client_id=(sid, pwd))
    twin.start()
    twin.stop()
    twin.close()


def test_master_recreates_its_node_after_its_session_expired(zk):
    """Heron's issue 1869: the master's session expires; on reconnect it must claim its node again."""
    st = ZkStateManager(_cfg(zk, session_timeout_s=4.0))
    observer = ZkStateManager(_cfg(zk))
    loop = asyncio.new_event_loop()
    roles = []
    sessions = []
    st.add_session_listener(sessions.append)
    worker = StateWorker(logging.getLogger("test"))
    election = Election(state=st, worker=worker, topology="wc",
                        location=lambda: TManagerLocation("127.0.0.1", 3333, os.getpid()),
                        loop=loop, on_role=lambda r, h: roles.append(r), log=logging.getLogger("test"))
    try:
        async def run():
            election.start()
            await _until(lambda: roles == [Role.ACTIVE], 10)
            first = observer.get_tmanager_location("wc").owner
            _expire_session(zk[0], st)
            await _until(lambda: "lost" in sessions and sessions[-1] == "connected", 20)
            # claimed again under the new session, and still active
            await _until(lambda: (observer.get_tmanager_location("wc") or TManagerLocation("", 0, 0)).owner
                         not in ("", first), 10)
            assert election.role is Role.ACTIVE
        loop.run_until_complete(run())
    finally:
        election.stop()
        worker.close()
        loop.close()
        st.close()
        observer.close()


async def _until(cond, timeout):
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError("timed out")
        await asyncio.sleep(0.05)


def test_role_rules():
    assert next_role(Role.CANDIDATE, True) is Role.ACTIVE
    assert next_role(Role.CANDIDATE, False) is Role.STANDBY
    assert next_role(Role.STANDBY, True) is Role.ACTIVE
    assert next_role(Role.STANDBY, False) is Role.STANDBY
    assert next_role(Role.ACTIVE, True) is Role.ACTIVE
    assert next_role(Role.ACTIVE, False) is Role.STOPPED
    assert next_role(Role.STOPPED, True) is Role.STOPPED


def test_unreachable_zookeeper_is_one_clear_error():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens here once the socket closes
    cfg = StateConfig(kind="zookeeper", zk_hosts=f"127.0.0.1:{port}", connect_timeout_s=2.0)
    t0 = time.monotonic()
    with pytest.raises(StateManagerError) as e:
        ZkStateManager(cfg)
    assert time.monotonic() - t0 < 4.0
    assert str(e.value) == (f"ZooKeeper at 127.0.0.1:{port} is not reachable: no session within the connect "
                            f"timeout of 2 s (is the server running? state manager zookeeper at "
                            f"127.0.0.1:{port}/heron-py)")
    # no kazoo thread left behind retrying
    assert not [t for t in threading.enumerate() if "kazoo" in t.name.lower()]


def test_state_config_errors(tmp_path):
    with pytest.raises(StateManagerError) as e:
        parse_zk("localhost")
    assert str(e.value) == "--zk: expected HOST:PORT[,HOST:PORT...][/chroot], found 'localhost'"
    assert parse_zk("a:1,b:2/x/y") == ("a:1,b:2", "/x/y")
    assert parse_zk("a:1") == ("a:1", "/heron-py")
    with pytest.raises(StateManagerError) as e:
        statecfg.resolve(None, {"HERON_PY_STATE_MANAGER": "etcd"}, home=tmp_path)
    assert str(e.value) == "$HERON_PY_STATE_MANAGER: expected one of localfs, zookeeper, found 'etcd'"
    with pytest.raises(StateManagerError) as e:
        statecfg.resolve(None, {"HERON_PY_STATE_MANAGER": "zookeeper"}, home=tmp_path)
    assert str(e.value) == ("--state-manager zookeeper: expected --zk HOST:PORT[,HOST:PORT...][/chroot] "
                            "(or $HERON_PY_ZK), found none")
    with pytest.raises(StateManagerError) as e:
        statecfg.resolve(None, {"HERON_PY_ZK": "h:1", "HERON_PY_ZK_SESSION_TIMEOUT": "-3"}, home=tmp_path)
    assert str(e.value) == "$HERON_PY_ZK_SESSION_TIMEOUT: expected a number of seconds > 0, found '-3'"
    cfg = statecfg.resolve(None, {"HERON_PY_ZK": "h:1/r"}, home=tmp_path)
    assert cfg.to_args() == ["--state-manager", "zookeeper", "--zk", "h:1/r", "--zk-session-timeout", "5"]
    # the conf file is read when neither flags nor environment say anything
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "statemgr.json").write_text('{"state_manager": "zookeeper", "zk": "z:2181/c"}')
    assert statecfg.resolve(None, {}, home=tmp_path).zk == "z:2181/c"
    (tmp_path / "conf" / "statemgr.json").write_text("[1]")
    with pytest.raises(StateManagerError) as e:
        statecfg.resolve(None, {}, home=tmp_path)
    assert str(e.value) == f"{tmp_path}/conf/statemgr.json: expected a JSON object, found list"
