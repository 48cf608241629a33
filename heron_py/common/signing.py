"""HMAC-SHA256 signatures under the topology secret for what heron-py stores and later
unpickles: the topology document (component classes, custom groupings, ``__pickled__`` config
values, streamlet closures) in the state store, and checkpoint files. Each kind has its own
label, so a signature of one kind never passes for another. The package has its own format
(``package.sign_package``)."""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Mapping
from typing import Any

TOPOLOGY_LABEL = b"heron-py topology document v1"
CHECKPOINT_LABEL = b"heron-py checkpoint v1"
SIGNATURE_KEY = "__signature__"


def mac(secret: bytes, label: bytes, data: bytes) -> bytes:
    return hmac.new(secret, label + b"\0" + data, hashlib.sha256).digest()


def canonical(doc: Mapping[str, Any]) -> bytes:
    """The bytes a document's signature covers: its JSON with sorted keys, less the signature."""
    return json.dumps({k: v for k, v in doc.items() if k != SIGNATURE_KEY}, sort_keys=True,
                      separators=(",", ":")).encode()


def sign_document(doc: dict[str, Any], secret: bytes, label: bytes = TOPOLOGY_LABEL) -> dict[str, Any]:
    return {**doc, SIGNATURE_KEY: mac(secret, label, canonical(doc)).hex()}


def document_problem(doc: Mapping[str, Any], secret: bytes, label: bytes = TOPOLOGY_LABEL) -> str | None:
    """None when ``doc`` carries a valid signature under ``secret``; else what was found."""
    sig = doc.get(SIGNATURE_KEY)
    if not isinstance(sig, str):
        return "no signature"
    if not hmac.compare_digest(sig, mac(secret, label, canonical(doc)).hex()):
        return "a signature that does not match the document"
    return None
