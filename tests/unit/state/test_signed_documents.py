"""The topology document is signed under the topology secret in the state store (issue 34,
item 4): it carries pickled user objects, so a document changed there is refused, never
unpickled, by the daemons that hold the secret."""

from __future__ import annotations

import json

import pytest

from heron_py.api.stream import Grouping
from heron_py.api.topology import TopologyBuilder
from heron_py.common.signing import CHECKPOINT_LABEL, document_problem, sign_document
from heron_py.state import LocalFsStateManager, StateManagerError
from tests.fakes import Counter, WordSpout


def _topology():
    b = TopologyBuilder("signed")
    spout = b.add_spout("words", WordSpout, par=1)
    b.add_bolt("count", Counter, par=1, inputs={spout: Grouping.SHUFFLE})
    return b.build()


def test_a_document_changed_in_the_state_store_is_refused(tmp_path) -> None:
    state = LocalFsStateManager(tmp_path)
    secret = b"k" * 32
    state.set_secret("signed", secret)
    topo = _topology()
    state.set_topology(topo)  # signed with the stored secret
    assert state.get_topology("signed", secret) == topo
    path = tmp_path / "state" / "topologies" / "signed"
    doc = json.loads(path.read_bytes())
    doc["config"]["topology.debug"] = "true"  # one value changed by someone with write access
    path.write_text(json.dumps(doc))
    with pytest.raises(StateManagerError) as e:
        state.get_topology("signed", secret)
    assert str(e.value) == (
        "topology 'signed': refusing the stored topology document: expected an HMAC-SHA256 signature under the "
        "topology secret, found a signature that does not match the document (it was changed in the state "
        "store after submit, or stored by a heron-py that did not sign it; resubmit the topology)")
    del doc["__signature__"]
    path.write_text(json.dumps(doc))
    with pytest.raises(StateManagerError, match="found no signature"):
        state.get_topology("signed", secret)
    with pytest.raises(StateManagerError, match="found no signature"):
        state.get_topology("signed")  # the CLI's reads check it too, under the stored secret


def test_signatures_are_per_kind_and_per_secret() -> None:
    doc = {"a": 1, "b": [1, 2]}
    signed = sign_document(doc, b"s")
    assert document_problem(signed, b"s") is None
    assert document_problem(signed, b"t") == "a signature that does not match the document"
    assert document_problem(signed, b"s", CHECKPOINT_LABEL) == "a signature that does not match the document"
    assert document_problem({**signed, "a": 2}, b"s") is not None
