"""The TLS material in the local state: stored privately next to the secret, removed with the topology."""

import stat

from heron_py.common.tls import TlsMaterial, make_topology_tls
from heron_py.state.localfs import LocalFsStateManager


def test_tls_material_is_stored_0600_apart_from_the_secret_and_deleted_with_the_topology(tmp_path):
    st = LocalFsStateManager(tmp_path)
    assert st.get_tls("wc") is None
    material = make_topology_tls("wc")
    st.set_secret("wc", b"s3cret")
    st.set_tls("wc", material.to_bytes())
    assert TlsMaterial.from_bytes(st.get_tls("wc")) == material
    path = tmp_path / "state" / "tls" / "wc"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert st.get_secret("wc") == b"s3cret"  # its own kind: no clash with the secret
    # a topology named "wc.tls" has a secret of its own, not wc's TLS material
    st.set_secret("wc.tls", b"other")
    assert TlsMaterial.from_bytes(st.get_tls("wc")) == material
    st.delete_topology("wc")
    assert st.get_tls("wc") is None and st.get_secret("wc") is None
    assert not path.exists()
    assert st.get_secret("wc.tls") == b"other"


def test_replacing_tls_material_keeps_it_private(tmp_path):
    st = LocalFsStateManager(tmp_path)
    st.set_tls("wc", b"one")
    st.set_tls("wc", b"two")
    assert st.get_tls("wc") == b"two"
    assert stat.S_IMODE((tmp_path / "state" / "tls" / "wc").stat().st_mode) == 0o600
    assert [p.name for p in (tmp_path / "state" / "tls").iterdir()] == ["wc"]  # no temporary left
