"""ZooKeeper nodes are readable and writable only with heron-py's digest credential (a real server)."""

import argparse
import os
import stat
import threading

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError

from heron_py.state import StateManagerError
from heron_py.state import config as statecfg
from heron_py.state.zookeeper import CHUNK, ZkStateManager, load_credential

pytestmark = pytest.mark.integration


@pytest.fixture
def auth_file(tmp_path, monkeypatch):
    path = tmp_path / "shared-home" / "zk.auth"
    monkeypatch.setenv("HERON_PY_ZK_AUTH_FILE", str(path))
    return path


def _client(hosts, auth=None):
    c = KazooClient(hosts=hosts, auth_data=[("digest", auth)] if auth else None)
    c.start()
    return c


def _tree(c, path):
    out = [path]
    for child in c.get_children(path):
        out += _tree(c, f"{path}/{child}")
    return out


def test_nodes_admit_only_heron_py_credential(zk, auth_file):
    server, _ = zk
    assert not auth_file.exists()
    st = ZkStateManager(statecfg.resolve())
    outsider = _client(server.hosts)
    guesser = _client(server.hosts, "heron-py:guess")
    try:
        big = os.urandom(int(1.5 * CHUNK))
        st.set_secret("wc", b"s3cret")
        st.set_package("wc", big)
        st.set_execution_state("wc", {"tmanager": {"pid": 1234}})
        # the credential: created on first use, private like the secret
        assert stat.S_IMODE(auth_file.stat().st_mode) == 0o600
        credential = auth_file.read_text().strip()
        assert credential.startswith("heron-py:") and len(credential) > len("heron-py:") + 30
        r = st.root
        for c in (outsider, guesser):
            with pytest.raises(NoAuthError):
                c.get(f"{r}/secrets/wc")
            with pytest.raises(NoAuthError):
                c.get(f"{r}/packages/wc/part-00000")
            with pytest.raises(NoAuthError):
                c.set(f"{r}/packages/wc", b"my code")  # replace the package
            with pytest.raises(NoAuthError):
                c.set(f"{r}/packages/wc/part-00000", b"my code")
            with pytest.raises(NoAuthError):
                c.create(f"{r}/packages/wc/part-00002", b"more code")
            with pytest.raises(NoAuthError):
                c.delete(f"{r}/packages/wc", recursive=True)
            with pytest.raises(NoAuthError):
                c.set(f"{r}/executionstate/wc", b'{"tmanager": {"pid": 1}}')  # point kill elsewhere
            with pytest.raises(NoAuthError):
                c.create(f"{r}/topologies/evil", b"pickles")
            with pytest.raises(NoAuthError):
                c.get_children(r)
        # heron-py reads and writes; so does any client given the credential
        assert st.get_secret("wc") == b"s3cret" and st.get_package("wc") == big
        insider = _client(server.hosts, credential)
        try:
            assert insider.get(f"{r}/secrets/wc")[0] == b"s3cret"
            # every node carries heron-py's ACL only: no world entry anywhere
            for path in _tree(insider, r):
                assert insider.get_acls(path)[0] == st.acl, path
            assert [(a.perms, a.id.scheme, a.id.id.split(":")[0]) for a in st.acl] == [(31, "digest", "heron-py")]
        finally:
            insider.stop()
            insider.close()
        # a second process reads the same credential; the file is not rewritten
        twin = ZkStateManager(statecfg.resolve())
        assert twin.get_secret("wc") == b"s3cret"
        twin.close()
        assert auth_file.read_text().strip() == credential
    finally:
        for c in (outsider, guesser):
            c.stop()
            c.close()
        st.close()


def test_another_credential_is_one_clear_error(zk, auth_file, tmp_path):
    st = ZkStateManager(statecfg.resolve())
    other = tmp_path / "other-home" / "zk.auth"
    cfg = statecfg.resolve(None, {**os.environ, "HERON_PY_ZK_AUTH_FILE": str(other)})
    try:
        with pytest.raises(StateManagerError) as e:
            ZkStateManager(cfg)
        assert str(e.value) == (
            f"ZooKeeper at {zk[0].hosts}: get_acls {st.root} refused (NoAuthError): expected the node's ACL to "
            f"admit heron-py's credential in {other}, found an ACL that does not (the node was made with another "
            f"credential: every heron-py process and host must read the same credential file)")
    finally:
        st.close()


def test_credential_file_errors(tmp_path):
    cfg = statecfg.StateConfig(kind="zookeeper", zk_hosts="127.0.0.1:1", zk_auth_file=str(tmp_path / "zk.auth"))
    f = tmp_path / "zk.auth"
    f.write_text("heron-py:pw\n")
    f.chmod(0o644)
    with pytest.raises(StateManagerError) as e:
        ZkStateManager(cfg)
    assert str(e.value) == (f"{f}: expected the ZooKeeper credential file to have mode 0600 (readable by its owner "
                            f"only), found 0644; run chmod 600 {f}")
    f.chmod(0o600)
    for content, found in (("", "0 words"), ("heron-py:a b\n", "2 words"),
                           ("no-colon\n", "a word without USER: before the password"),
                           ("heron-py:\n", "a word without USER: before the password")):
        f.write_text(content)
        with pytest.raises(StateManagerError) as e:
            load_credential(f)
        assert str(e.value) == (f"{f}: expected one line USER:PASSWORD (heron-py's ZooKeeper digest credential), "
                                f"found {found}")


def test_credential_created_once_when_many_start_at_once(tmp_path):
    path = tmp_path / "home" / "zk.auth"
    got = []
    threads = [threading.Thread(target=lambda: got.append(load_credential(path))) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(got) == 16 and len(set(got)) == 1 and got[0][0] == "heron-py"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert [p.name for p in path.parent.iterdir()] == ["zk.auth"]  # no temporary file left


def test_auth_file_path_travels_to_children(tmp_path):
    home = tmp_path / "home"
    cfg = statecfg.resolve(None, {"HERON_PY_ZK": "h:1/r"}, home=home)
    # the default: zk.auth under each process's heron home, not passed on
    assert cfg.to_args() == ["--state-manager", "zookeeper", "--zk", "h:1/r", "--zk-session-timeout", "5"]
    assert statecfg.zk_auth_path(cfg, home) == home / "zk.auth"
    assert statecfg.zk_auth_path(cfg, None, {"HERON_PY_HOME": str(home)}) == home / "zk.auth"
    named = statecfg.resolve(None, {"HERON_PY_ZK": "h:1/r", "HERON_PY_ZK_AUTH_FILE": str(tmp_path / "a")}, home=home)
    assert named.to_args()[-2:] == ["--zk-auth-file", str(tmp_path / "a")]
    ap = argparse.ArgumentParser()
    statecfg.add_arguments(ap)
    child = statecfg.resolve(ap.parse_args(named.to_args()), {}, home=home)
    assert child == named and statecfg.zk_auth_path(child, home) == tmp_path / "a"
