"""Checkpoint keys in a kind of their own (heron_py/state/base.py): a topology named ``X.ckpt``
neither replaces nor deletes topology X's key, keys outlive a kill, and a key found where an
older heron-py kept it (``secrets/X.ckpt``) moves to its own kind the first time it is read."""

from __future__ import annotations

import stat

import pytest

from heron_py.api.stream import Grouping
from heron_py.api.topology import TopologyBuilder
from heron_py.planner.model import TopologyDef
from heron_py.state import LocalFsStateManager, StateConfig, StateManager
from heron_py.state.config import parse_zk
from heron_py.state.zookeeper import ZkStateManager
from tests.fakes import Counter, WordSpout

OLD_KEY = b"o" * 32


def _topology(name: str) -> TopologyDef:
    b = TopologyBuilder(name)
    spout = b.add_spout("words", WordSpout, par=1)
    b.add_bolt("count", Counter, par=1, inputs={spout: Grouping.SHUFFLE})
    return b.build()


def _submit(state: StateManager, name: str) -> None:
    """What submit stores for a topology: its secret, its name's checkpoint key, its document."""
    state.set_secret(name, bytes([len(name)]) * 32)
    state.checkpoint_key(name)
    state.set_topology(_topology(name))


def test_a_topology_named_x_ckpt_neither_replaces_nor_deletes_xs_key(tmp_path) -> None:
    state = LocalFsStateManager(tmp_path)
    _submit(state, "wc")
    key = state.get_checkpoint_key("wc")
    assert key is not None
    _submit(state, "wc.ckpt")
    assert state.get_checkpoint_key("wc") == key
    assert state.get_secret("wc") == bytes([2]) * 32 and state.get_secret("wc.ckpt") == bytes([7]) * 32
    state.delete_topology("wc.ckpt")
    assert state.get_checkpoint_key("wc") == key


def test_keys_and_checkpoint_records_outlive_a_kill(tmp_path) -> None:
    state = LocalFsStateManager(tmp_path)
    _submit(state, "wc")
    key = state.get_checkpoint_key("wc")
    state.set_checkpoint_record("wc", {"complete": 4})
    state.delete_topology("wc")
    assert state.get_secret("wc") is None and state.get_topology("wc") is None
    assert state.get_checkpoint_key("wc") == key and state.checkpoint_key("wc") == key
    assert state.get_checkpoint_record("wc") == {"complete": 4}


def test_a_key_at_the_old_place_moves_to_its_own_kind_on_its_first_read(tmp_path) -> None:
    state = LocalFsStateManager(tmp_path)
    state._put("secrets", "wc.ckpt", OLD_KEY, private=True)  # as an older heron-py stored it
    old, new = tmp_path / "state" / "secrets" / "wc.ckpt", tmp_path / "state" / "checkpointkeys" / "wc"
    assert state.get_checkpoint_key("wc") == OLD_KEY  # a running topology's checkpoints stay readable
    assert not old.exists() and new.read_bytes() == OLD_KEY
    assert stat.S_IMODE(new.stat().st_mode) == 0o600
    assert state.checkpoint_key("wc") == OLD_KEY  # submit again: the same key, not a new one


def test_submitting_x_ckpt_first_moves_xs_key_from_the_old_place(tmp_path) -> None:
    state = LocalFsStateManager(tmp_path)
    state._put("secrets", "wc.ckpt", OLD_KEY, private=True)
    _submit(state, "wc.ckpt")
    assert state.get_checkpoint_key("wc") == OLD_KEY
    assert state.get_secret("wc.ckpt") == bytes([7]) * 32


def test_the_secret_of_a_running_x_ckpt_is_never_taken_for_xs_key(tmp_path) -> None:
    state = LocalFsStateManager(tmp_path)
    state._put("secrets", "wc.ckpt", OLD_KEY, private=True)
    state.set_topology(_topology("wc.ckpt"), OLD_KEY)  # a topology named wc.ckpt runs: the node is its secret
    assert state.get_checkpoint_key("wc") is None
    assert state.get_secret("wc.ckpt") == OLD_KEY


def test_zookeeper_keeps_every_kind_and_keys_are_kept_at_kill() -> None:
    assert set(StateManager.KINDS) <= set(ZkStateManager.LAYOUT)
    assert {"checkpointkeys", "checkpointrecords"} <= set(StateManager.KEPT_AT_KILL)


@pytest.mark.integration
def test_on_zookeeper_an_older_tree_gets_the_kind_and_its_key_moves(zk) -> None:
    """A tree an older heron-py made (no checkpointkeys node, the key at secrets/wc.ckpt): the next
    start makes the node with heron-py's ACL alone, and the key moves on its first read."""
    hosts, root = parse_zk(zk[1])
    cfg = StateConfig(kind="zookeeper", zk_hosts=hosts, zk_root=root)
    old = ZkStateManager(cfg)
    try:
        old._zk.delete(f"{old.root}/checkpointkeys")
        old._put("secrets", "wc.ckpt", OLD_KEY, private=True)
    finally:
        old.close()
    st = ZkStateManager(cfg)
    try:
        assert st.get_checkpoint_key("wc") == OLD_KEY
        assert st._zk.exists(f"{st.root}/secrets/wc.ckpt") is None
        assert st._zk.get(f"{st.root}/checkpointkeys/wc")[0] == OLD_KEY
        assert list(st._zk.get_acls(f"{st.root}/checkpointkeys/wc")[0]) == st.acl
        assert list(st._zk.get_acls(f"{st.root}/checkpointkeys")[0]) == st.acl
        st.delete_topology("wc")
        assert st.get_checkpoint_key("wc") == OLD_KEY
    finally:
        st.close()
