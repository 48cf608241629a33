"""heron-py trusts only ZooKeeper nodes that carry its own credential's ACL (a real ZooKeeper and
a second ZooKeeper user, the attacker, with a digest credential of its own).

Another user of the ensemble can create nodes wherever an ACL lets it: the default root before
heron-py's first start, a child of any node whose ACL gives it CREATE. heron-py starts only when
its root and every layout node carry heron-py's credential ACL and nothing else; a node below
them whose ACL is not that one is refused before heron-py reads it or writes to it. So an
attacker's secret or package is never used, and heron-py's secret never lands where the attacker
reads it. Parents that heron-py makes above a named root let others list them, not create in
them. An older heron-py's open tree is refused too (anyone could have changed it): nothing is
re-ACLed behind the operator's back."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
from kazoo.security import OPEN_ACL_UNSAFE, make_acl, make_digest_acl

from heron_py.state import StateManagerError
from heron_py.state.config import StateConfig
from heron_py.state.zookeeper import CHUNK, ZkStateManager, load_credential
from tests.zkserver import ZkServer

pytestmark = pytest.mark.integration

# the squat the review demonstrated: everything but ADMIN for anyone
WORLD_RWCD = [make_acl("world", "anyone", read=True, write=True, create=True, delete=True)]
MALLORY = ("mallory", "her-own-password")


def _client(hosts: str, cred: tuple[str, str] | None = None) -> KazooClient:
    c = KazooClient(hosts=hosts, auth_data=[("digest", ":".join(cred))] if cred else None)
    c.start(timeout=10)
    return c


class Ensemble:
    """The shared test ZooKeeper seen by three parties: heron-py (``start``), the attacker
    (another digest credential) and the operator (heron-py's credential in zkCli.sh)."""

    def __init__(self, server: ZkServer, root: str, auth: Path) -> None:
        self.hosts, self.root, self.auth = server.hosts, root, auth
        self.attacker = _client(self.hosts, MALLORY)
        self._operator: KazooClient | None = None

    def cfg(self, root: str | None = None) -> StateConfig:
        return StateConfig(kind="zookeeper", zk_hosts=self.hosts, zk_root=root or self.root,
                           zk_auth_file=str(self.auth))

    def start(self, root: str | None = None) -> ZkStateManager:
        return ZkStateManager(self.cfg(root))

    def refused(self, root: str | None = None) -> str:
        with pytest.raises(StateManagerError) as e:
            self.start(root).close()
        return str(e.value)

    @property
    def operator(self) -> KazooClient:
        if self._operator is None:
            self._operator = _client(self.hosts, load_credential(self.auth))
        return self._operator

    @property
    def ours(self) -> list:
        return [make_digest_acl(*load_credential(self.auth), all=True)]

    def close(self) -> None:
        for c in (self.attacker, self._operator):
            if c is not None:
                c.stop()
                c.close()


@pytest.fixture
def ens(zk: tuple[ZkServer, str], tmp_path: Path) -> Iterator[Ensemble]:
    server, spec = zk
    e = Ensemble(server, "/" + spec.split("/", 1)[1], tmp_path / "zk.auth")
    yield e
    e.close()


def _refusal(e: Ensemble, path: str, found: str, how: str) -> str:
    """The refusal line; ``how`` is its end: what heron-py will not do and the fix."""
    return (f"ZooKeeper at {e.hosts}: node {path} has ACL [{found}], expected only heron-py's credential "
            f"(digest:heron-py:...:cdrwa, the credential in {e.auth}); someone else created it or changed its "
            f"ACL, so heron-py will not {how}")


AT_START = "use it: delete it (or fix its ACL with setAcl) and start again"
AT_READ = "use what it holds: delete it and submit the topology again"


def test_a_squatted_root_is_refused_at_start(ens: Ensemble) -> None:
    """The demonstrated attack: before heron-py's first start, another user makes the root and
    the layout nodes, letting anyone read, write, create and delete in them (nobody has ADMIN)."""
    layout = ZkStateManager.LAYOUT
    ens.attacker.create(ens.root, b"", acl=WORLD_RWCD)
    for kind in layout:
        ens.attacker.create(f"{ens.root}/{kind}", b"", acl=WORLD_RWCD)
    assert ens.refused() == (
        f"ZooKeeper at {ens.hosts}: node {ens.root} has ACL [world:anyone:cdrw], expected only heron-py's "
        f"credential (digest:heron-py:...:cdrwa, the credential in {ens.auth}); someone else created it or "
        f"changed its ACL, so heron-py will not use it: delete it (or fix its ACL with setAcl) and start again")
    # heron-py wrote nothing into the attacker's tree
    assert sorted(ens.attacker.get_children(ens.root)) == sorted(layout)
    for kind in layout:
        assert ens.attacker.get_children(f"{ens.root}/{kind}") == []
    # the fix the line gives: the squatted tree deleted, heron-py makes its own
    ens.operator.delete(ens.root, recursive=True)  # anyone may, in the squatted tree
    ens.start().close()
    assert ens.operator.get_acls(ens.root)[0] == ens.ours
    with pytest.raises(NoAuthError):
        ens.attacker.create(f"{ens.root}/secrets/wc", b"hers")


def test_every_layout_node_is_checked(ens: Ensemble) -> None:
    """The operator fixes only the root's ACL: each squatted layout node below is refused in
    turn, until it is deleted too."""
    ens.attacker.create(ens.root, b"", acl=OPEN_ACL_UNSAFE)
    for kind in ZkStateManager.LAYOUT:
        ens.attacker.create(f"{ens.root}/{kind}", b"", acl=WORLD_RWCD)
    ens.operator.set_acls(ens.root, ens.ours)
    for kind in ZkStateManager.LAYOUT:
        assert ens.refused() == _refusal(ens, f"{ens.root}/{kind}", "world:anyone:cdrw", AT_START)
        # nobody has ADMIN on it to fix its ACL: the operator deletes it, heron-py makes its own
        ens.operator.delete(f"{ens.root}/{kind}")
    ens.start().close()
    for kind in ZkStateManager.LAYOUT:
        assert ens.operator.get_acls(f"{ens.root}/{kind}")[0] == ens.ours


def test_acls_that_are_not_only_ours_are_refused(ens: Ensemble) -> None:
    """Any permission for any other identity makes a node someone else's; our own entry with
    fewer rights is not ours either. A node with exactly our ACL is ours, whoever made it: only
    holders of the credential can give a node that ACL."""
    ours = ens.ours[0]
    mallory = make_digest_acl(*MALLORY, read=True)
    cases = [
        ([ours, make_acl("world", "anyone", read=True)], "digest:heron-py:...:cdrwa, world:anyone:r"),
        ([ours, make_acl("ip", "127.0.0.1", all=True)], "digest:heron-py:...:cdrwa, ip:127.0.0.1:cdrwa"),
        ([mallory, ours], f"digest:{mallory.id.id}:r, digest:heron-py:...:cdrwa"),
        # without ADMIN on a node, a client is shown digests as USER:x (ZooKeeper hides them)
        ([make_digest_acl(*load_credential(ens.auth), read=True, write=True, create=True, delete=True)],
         "digest:heron-py:x:cdrw"),
    ]
    for acl, found in cases:
        ens.operator.create(ens.root, b"", acl=acl)
        assert ens.refused() == _refusal(ens, ens.root, found, AT_START)
        ens.operator.delete(ens.root)
    ens.operator.create(ens.root, b"", acl=ens.ours)
    ens.start().close()


def test_an_older_heron_py_tree_is_refused_not_adopted(ens: Ensemble) -> None:
    """A heron-py before ACLs left its nodes open to anyone, so anyone may have changed what they
    hold: re-ACLing them would make a changed secret or package heron-py's own."""
    old = _client(ens.hosts)
    try:
        old.create(f"{ens.root}/secrets/wc", b"old or changed secret", makepath=True)
        assert old.get_acls(ens.root)[0] == list(OPEN_ACL_UNSAFE)
        assert ens.refused() == _refusal(ens, ens.root, "world:anyone:cdrwa", AT_START)
        # nothing was re-ACLed
        assert old.get(f"{ens.root}/secrets/wc")[0] == b"old or changed secret"
        assert old.get_acls(ens.root)[0] == list(OPEN_ACL_UNSAFE)
    finally:
        old.stop()
        old.close()


@contextmanager
def _window(ens: Ensemble, parent: str) -> Iterator[None]:
    """A node of heron-py's that gave anyone CREATE and DELETE for a while (the root or a layout
    node an operator once opened, a tree before its ACL was fixed)."""
    ens.operator.set_acls(parent, [*ens.ours, make_acl("world", "anyone", create=True, delete=True)])
    try:
        yield
    finally:
        ens.operator.set_acls(parent, ens.ours)


def test_a_secret_package_or_topology_someone_else_made_is_refused_when_read(ens: Ensemble) -> None:
    st = ens.start()
    try:
        st.set_package("big", b"p" * int(1.5 * CHUNK))
        r = ens.root
        for kind in ("secrets", "packages", "topologies"):
            with _window(ens, f"{r}/{kind}"):
                ens.attacker.create(f"{r}/{kind}/wc", b"", acl=WORLD_RWCD)
        with _window(ens, f"{r}/packages/big"):
            ens.attacker.delete(f"{r}/packages/big/part-00001")
            ens.attacker.create(f"{r}/packages/big/part-00001", b"her code", acl=WORLD_RWCD)
        # the demonstrated swap: her secret, her package, her topology document
        ens.attacker.set(f"{r}/secrets/wc", b"her secret")
        ens.attacker.set(f"{r}/packages/wc", b"her package")
        ens.attacker.set(f"{r}/topologies/wc", b'{"name": "wc"}')
        for read, path in ((st.get_secret, "secrets/wc"), (st.get_package, "packages/wc"),
                           (st.get_topology, "topologies/wc"), (st.get_package, "packages/big/part-00001")):
            name = path.split("/")[1]
            with pytest.raises(StateManagerError) as e:
                read(name)
            assert str(e.value) == _refusal(ens, f"{r}/{path}", "world:anyone:cdrw", AT_READ)
        # refused before the signature check, with whatever secret a daemon holds
        with pytest.raises(StateManagerError) as e:
            st.get_topology("wc", b"her secret")
        assert str(e.value) == _refusal(ens, f"{r}/topologies/wc", "world:anyone:cdrw", AT_READ)
    finally:
        st.close()


def test_a_secret_is_never_written_into_a_node_someone_else_made(ens: Ensemble) -> None:
    st = ens.start()
    try:
        with _window(ens, f"{ens.root}/secrets"):
            ens.attacker.create(f"{ens.root}/secrets/wc", b"", acl=WORLD_RWCD)
        with pytest.raises(StateManagerError) as e:
            st.set_secret("wc", b"our secret")
        assert str(e.value) == _refusal(ens, f"{ens.root}/secrets/wc", "world:anyone:cdrw",
                                        "write to it: delete it and try again")
        assert ens.attacker.get(f"{ens.root}/secrets/wc")[0] == b""  # she read nothing of ours
        ens.operator.delete(f"{ens.root}/secrets/wc")
        st.set_secret("wc", b"our secret")
        assert st.get_secret("wc") == b"our secret"
    finally:
        st.close()


def test_parents_above_a_named_root_let_others_list_not_create(ens: Ensemble) -> None:
    top = f"{ens.root}-parents"  # a path of this test's own on the shared server
    st = ens.start(f"{top}/a/heron-py")
    try:
        parent_acl = [make_acl("world", "anyone", read=True), *ens.ours]
        for path in (top, f"{top}/a"):
            assert ens.operator.get_acls(path)[0] == parent_acl
            with pytest.raises(NoAuthError):
                ens.attacker.create(f"{path}/squat", b"")
        assert ens.attacker.get_children(f"{top}/a") == ["heron-py"]
        assert ens.operator.get_acls(f"{top}/a/heron-py")[0] == ens.ours
    finally:
        st.close()


def test_existing_parents_keep_their_acl_and_the_root_below_is_checked(ens: Ensemble) -> None:
    top = f"{ens.root}-shared"
    ens.attacker.create(f"{top}/other-app", b"", acl=OPEN_ACL_UNSAFE, makepath=True)
    ens.start(f"{top}/heron-py").close()
    assert ens.attacker.get_acls(top)[0] == list(OPEN_ACL_UNSAFE)  # not ours to change
    assert ens.operator.get_acls(f"{top}/heron-py")[0] == ens.ours
    # below an open parent, a root someone else made is refused like any other
    ens.attacker.create(f"{top}/team-b", b"", acl=WORLD_RWCD)
    assert ens.refused(f"{top}/team-b") == _refusal(ens, f"{top}/team-b", "world:anyone:cdrw", AT_START)


def test_a_parent_that_does_not_let_heron_py_create_is_one_line(ens: Ensemble) -> None:
    top = f"{ens.root}-closed"
    ens.attacker.create(top, b"", acl=[make_acl("world", "anyone", read=True)])
    assert ens.refused(f"{top}/heron-py") == (
        f"ZooKeeper at {ens.hosts}: cannot create the root {top}/heron-py: its parent {top} does not let "
        f"heron-py's credential in {ens.auth} create nodes (NoAuthError); let that credential create in {top} "
        f"(setAcl), or choose another root")
