"""ZooKeeper over TLS (a real Debian ZooKeeper with only a secure client port, client
certificates required): the state manager stores and reads over it, a client without TLS gets
nothing from it, a word count submitted with the TLS settings on the command line runs (every
daemon got them from its parent), and a wrong CA or a missing client certificate is one error
line. Also: heron-py never sets an ACL above its own root, so teams can keep roots side by side."""

from __future__ import annotations

import os
import socket
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
import wc_common
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
from kazoo.security import OPEN_ACL_UNSAFE, make_acl

from heron_py.scheduler.local import LocalScheduler
from heron_py.state import StateManagerError
from heron_py.state.config import StateConfig
from heron_py.state.zookeeper import ZkStateManager, load_credential
from heron_py.testing import run_local
from tests.conftest import EXAMPLES
from tests.support import run_cli
from tests.zkserver import Pki, ZkServer, make_pki, missing_tls_tools

pytestmark = pytest.mark.integration

N = 500  # sentences of the word count


@pytest.fixture(scope="module")
def tls_zk(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZkServer]:
    why = missing_tls_tools()
    if why:
        pytest.skip(why)
    base = tmp_path_factory.mktemp("zk-tls")
    # the server's certificate names localhost only: 127.0.0.1 checks the host-name switch
    server = ZkServer(base / "server", tls=make_pki(base / "pki", server_names=("localhost",)))
    server.start()
    yield server
    server.stop()


def _pki(server: ZkServer) -> Pki:
    assert server.tls is not None
    return server.tls


def _cfg(server: ZkServer, tmp_path: Path, root: str = "/t", **kw: object) -> StateConfig:
    pki = _pki(server)
    fields: dict = {"kind": "zookeeper", "zk_hosts": f"localhost:{server.port}", "zk_root": root,
                    "zk_auth_file": str(tmp_path / "zk.auth"), "zk_tls": True, "zk_ca_file": str(pki.ca),
                    "zk_cert_file": str(pki.client_cert), "zk_key_file": str(pki.client_key),
                    "connect_timeout_s": 2.0}
    fields.update(kw)
    return StateConfig(**fields)


def _raw(server: ZkServer, auth: Path | None = None) -> KazooClient:
    """A plain kazoo client over TLS, with the credential in ``auth`` or none."""
    pki = _pki(server)
    creds = [("digest", ":".join(load_credential(auth)))] if auth else None
    c = KazooClient(hosts=f"localhost:{server.port}", auth_data=creds, use_ssl=True, ca=str(pki.ca),
                    certfile=str(pki.client_cert), keyfile=str(pki.client_key), check_hostname=True)
    c.start(timeout=10)
    return c


def test_state_stores_and_reads_a_secret_over_tls(tls_zk: ZkServer, tmp_path: Path) -> None:
    st = ZkStateManager(_cfg(tls_zk, tmp_path, "/t-secret"))
    try:
        st.set_secret("wc", b"s3cret")
        assert st.get_secret("wc") == b"s3cret"
        assert st.cfg.describe() == f"zookeeper at localhost:{tls_zk.port}/t-secret over TLS"
    finally:
        st.close()
    insider, outsider = _raw(tls_zk, tmp_path / "zk.auth"), _raw(tls_zk)
    try:
        assert insider.get("/t-secret/secrets/wc")[0] == b"s3cret"
        with pytest.raises(NoAuthError):  # TLS is no credential: the ACL still keeps others out
            outsider.get("/t-secret/secrets/wc")
    finally:
        for c in (insider, outsider):
            c.stop()
            c.close()


def test_a_client_without_tls_gets_nothing_from_the_port(tls_zk: ZkServer, tmp_path: Path) -> None:
    with socket.create_connection(("127.0.0.1", tls_zk.port), timeout=2) as s:
        s.sendall(b"ruok")
        s.settimeout(2)
        try:
            answer = s.recv(8)
        except (TimeoutError, ConnectionResetError):
            answer = b""
    assert answer != b"imok"
    cfg = _cfg(tls_zk, tmp_path, zk_tls=False, zk_ca_file="", zk_cert_file="", zk_key_file="")
    with pytest.raises(StateManagerError) as e:
        ZkStateManager(cfg)
    assert str(e.value) == (f"ZooKeeper at localhost:{tls_zk.port} is not reachable: no session within the connect "
                            f"timeout of 2 s (is the server running? state manager zookeeper at "
                            f"localhost:{tls_zk.port}/t)")


def test_wrong_ca_is_one_error_line(tls_zk: ZkServer, tmp_path: Path) -> None:
    pki = _pki(tls_zk)
    env = {"HERON_PY_ZK": f"localhost:{tls_zk.port}/t", "HERON_PY_ZK_AUTH_FILE": str(tmp_path / "zk.auth")}
    t0 = time.monotonic()
    proc = run_cli(tmp_path, "list", "local", "--zk-tls", "--zk-ca-file", str(pki.other_ca),
                   "--zk-cert-file", str(pki.client_cert), "--zk-key-file", str(pki.client_key), **env)
    assert time.monotonic() - t0 < 5 + 10  # the connect timeout, the probe, interpreter start
    assert proc.returncode == 1
    assert proc.stderr == (
        f"heron-py: error: ZooKeeper at localhost:{tls_zk.port}: TLS handshake failed: localhost:{tls_zk.port}: "
        "certificate verify failed: unable to get local issuer certificate (expected a server certificate "
        f"signed by a CA in {pki.other_ca} naming the host in --zk); state manager zookeeper at "
        f"localhost:{tls_zk.port}/t over TLS\n")


def test_missing_client_certificate_and_host_name(tls_zk: ZkServer, tmp_path: Path) -> None:
    with pytest.raises(StateManagerError) as e:
        ZkStateManager(_cfg(tls_zk, tmp_path, zk_cert_file="", zk_key_file=""))
    # Debian's ZooKeeper (Java 17, Netty) answers TLS 1.2's bad_certificate alert
    assert str(e.value) == (
        f"ZooKeeper at localhost:{tls_zk.port}: TLS handshake failed: localhost:{tls_zk.port}: the server refused "
        "it (SSLV3_ALERT_BAD_CERTIFICATE): expected a client certificate its trust store accepts, found none "
        f"(no --zk-cert-file); state manager zookeeper at localhost:{tls_zk.port}/t over TLS")
    # the certificate names localhost, not 127.0.0.1: refused unless the host-name check is off
    hosts = f"127.0.0.1:{tls_zk.port}"
    with pytest.raises(StateManagerError) as e:
        ZkStateManager(_cfg(tls_zk, tmp_path, zk_hosts=hosts))
    assert str(e.value) == (
        f"ZooKeeper at {hosts}: TLS handshake failed: {hosts}: certificate verify failed: IP address mismatch, "
        f"certificate is not valid for '127.0.0.1'. (expected a server certificate signed by a CA in "
        f"{_pki(tls_zk).ca} naming the host in --zk); state manager zookeeper at {hosts}/t over TLS")
    ZkStateManager(_cfg(tls_zk, tmp_path, zk_hosts=hosts, zk_tls_verify_hostname=False)).close()


def test_acls_never_set_above_the_root(tls_zk: ZkServer, tmp_path: Path) -> None:
    """Per-user roots: another program's open nodes beside and above a root keep their ACLs, and
    two teams with their own credentials keep roots side by side, each unreadable to the other."""
    other = _raw(tls_zk)  # another program, no credential: its nodes are open
    try:
        other.create("/shared/other-app", b"x", makepath=True)
        # the operator's parent for team roots: anyone may list it and create in it
        teams_acl = [make_acl("world", "anyone", read=True, create=True)]
        other.create("/teams/x", b"", acl=teams_acl, makepath=True)
        (tmp_path / "a").mkdir()
        (tmp_path / "b").mkdir()
        a = ZkStateManager(_cfg(tls_zk, tmp_path / "a", "/shared/team-a"))
        b = ZkStateManager(_cfg(tls_zk, tmp_path / "b", "/teams/x/team-b"))
        b2 = ZkStateManager(_cfg(tls_zk, tmp_path / "a", "/teams/x/team-a"))
        try:
            a.set_secret("wc", b"a's")
            b.set_secret("wc", b"b's")
            b2.set_secret("wc", b"a's too")
            assert b.get_secret("wc") == b"b's" and b2.get_secret("wc") == b"a's too"
            # nothing above or beside a root changed
            assert other.get_acls("/shared")[0] == list(OPEN_ACL_UNSAFE)
            assert other.get_acls("/shared/other-app")[0] == list(OPEN_ACL_UNSAFE)
            assert other.get_acls("/teams")[0] == other.get_acls("/teams/x")[0] == teams_acl
            with pytest.raises(NoAuthError):
                other.get_acls("/shared/team-a")  # get_acls needs READ or ADMIN on the node: none
        finally:
            for st in (a, b, b2):
                st.close()
        team_a = _raw(tls_zk, tmp_path / "a" / "zk.auth")
        try:
            assert team_a.get("/teams/x/team-a/secrets/wc")[0] == b"a's too"
            with pytest.raises(NoAuthError):
                team_a.get("/teams/x/team-b/secrets/wc")
        finally:
            team_a.stop()
            team_a.close()
    finally:
        other.stop()
        other.close()


def test_word_count_over_tls(tls_zk: ZkServer, heron_home: Path, tmp_path: Path,
                             monkeypatch: pytest.MonkeyPatch) -> None:
    """The TLS settings are given on the submit's command line only, and the server has no
    plaintext port: the topology runs only if every daemon got them from its parent."""
    pki = _pki(tls_zk)
    tls_args = ["--zk-tls", "--zk-ca-file", str(pki.ca), "--zk-cert-file", str(pki.client_cert),
                "--zk-key-file", str(pki.client_key)]
    for key in [k for k in os.environ if k.startswith("HERON_PY_ZK")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("HERON_PY_STATE_MANAGER", "zookeeper")
    monkeypatch.setenv("HERON_PY_ZK", f"localhost:{tls_zk.port}/t-wc")
    monkeypatch.setenv("HERON_PY_ZK_AUTH_FILE", str(tmp_path / "zk.auth"))
    expected = wc_common.expected_counts(N)
    total = sum(expected.values())
    name = "wc_tls"
    try:
        run = run_local(EXAMPLES / "word_count.py", ["--sentences", str(N)], home=heron_home, name=name,
                        containers=2, capture=["count"], until=lambda r: len(r["count"]) >= total, timeout=90,
                        keep_running=True, submit_args=tls_args)
        assert Counter(v[0] for v in run.values("count")) == expected
        st = ZkStateManager(_cfg(tls_zk, tmp_path, "/t-wc", zk_auth_file=str(tmp_path / "zk.auth")))
        try:
            topology_id = st.get_scheduler_location(name)["topology_id"]
        finally:
            st.close()
        procs = LocalScheduler.topology_processes(topology_id)
        # every process that opens the state manager (instances do not) got the settings
        daemons = [p.cmdline() for p in procs if "--state-manager" in p.cmdline()]
        for cmd in daemons:
            assert cmd[cmd.index("--zk-tls"):][:7] == tls_args, cmd
        assert Counter(cmd[cmd.index("-m") + 1] for cmd in daemons) == {
            "heron_py.scheduler.executor": 2, "stream_manager": 2, "metrics_manager": 2, "topology_master": 1,
            "heron_py.scheduler.supervisor": 1}
    finally:
        proc = run_cli(heron_home, "kill", "local", name, *tls_args)
        # the home fixture's own clean-up opens the state from the environment
        monkeypatch.setenv("HERON_PY_ZK_TLS", "true")
        monkeypatch.setenv("HERON_PY_ZK_CA_FILE", str(pki.ca))
        monkeypatch.setenv("HERON_PY_ZK_CERT_FILE", str(pki.client_cert))
        monkeypatch.setenv("HERON_PY_ZK_KEY_FILE", str(pki.client_key))
    assert proc.returncode == 0, proc.stderr
    assert not [p for p in procs if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
