"""Per-frame authentication after the handshake, sans-I/O.

The handshake (``handshake.py``) proves that both ends hold the topology secret over fresh
nonces. That alone does not protect what follows: a relay that forwards a real peer's
handshake byte for byte would be left holding an authenticated connection it could write
into. So both ends derive two session keys from the handshake (HKDF-SHA256 over the secret,
salted with both nonces, bound to the client's role and id and the server's), one per
direction, and every frame after the handshake carries a 16-byte tag:

    frame (6-byte header | payload) | tag,   tag = GMAC(key_dir, nonce = seq, frame)

GMAC is AES-256-GCM with nothing to encrypt and the frame as its associated data: a MAC whose
security rests on never reusing a nonce under one key, which holds because every direction of
every connection has its own key and ``seq`` never repeats on it. It is chosen over HMAC-SHA256
for speed, measured on this machine: 0.9 µs instead of 2.4 µs for a 64-byte frame, 1.0 µs
instead of 7.0 µs for an 8 KB batch, 3.5 µs instead of 38 µs for 64 KB (AES-NI and carry-less
multiply do the work; HMAC hashes every byte twice through SHA-256). The frames are sent in
clear either way: confidentiality across hosts is TLS's job.

``seq`` counts the frames of one direction from 0, so a frame that is dropped, replayed,
reordered or moved to another connection fails as surely as a changed byte. The receiver
checks the tag before anything looks at the payload: a frame that fails is never decoded
(``framing.FrameDecoder`` raises ``FrameAuthError``), and the connection is aborted.

A relay without the secret can still forward the bytes unchanged; that is a pipe, not a
peer: it can delay or cut the link, which the heartbeats detect, but not write into it.
"""

from __future__ import annotations

import hmac
import struct

TAG_SIZE = 16
KEY_SIZE = 32
# 96-bit GCM nonce: 4 zero bytes, then the frame's sequence number
_NONCE = struct.Struct(">IQ")
# v2: the keys are AES-256-GCM keys (v1 keyed HMAC-SHA256); a new label keeps the two apart
_INFO = b"heron-py frame keys v2"


def _lp(*parts: bytes) -> bytes:
    # length-prefixed, so ("ab", "c") and ("a", "bc") give different info strings
    return b"".join(len(p).to_bytes(4, "big") + p for p in parts)


def session_keys(secret: bytes, nonce_c: bytes, nonce_s: bytes, client_role: str, client_id: str,
                 server_role: str, server_id: str = "") -> tuple[bytes, bytes]:
    """(client→server key, server→client key) of one connection."""
    # imported here: a process that never completes a handshake never loads cryptography
    # (the fork server imports it once for every daemon of a container)
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.kdf.hkdf import HKDF

    okm = HKDF(algorithm=hashes.SHA256(), length=2 * KEY_SIZE, salt=nonce_c + nonce_s,
               info=_INFO + _lp(client_role.encode(), client_id.encode(), server_role.encode(),
                                server_id.encode())).derive(secret)
    return okm[:KEY_SIZE], okm[KEY_SIZE:]


class FrameMac:
    """One direction of a connection: the key and the next sequence number."""

    __slots__ = ("_gmac", "_seq")

    def __init__(self, key: bytes) -> None:
        if len(key) != KEY_SIZE:
            raise ValueError(f"frame key: expected {KEY_SIZE} bytes, found {len(key)}")
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        # bound once: the AES key schedule is expanded here, not per frame
        self._gmac = AESGCM(key).encrypt
        self._seq = 0

    @property
    def seq(self) -> int:
        """Frames tagged (sender) or accepted (receiver) so far."""
        return self._seq

    def tag(self, frame: bytes) -> bytes:
        """The tag of the next frame sent; advances the sequence."""
        seq = self._seq
        self._seq = seq + 1
        return self._gmac(_NONCE.pack(0, seq), b"", frame)

    def check(self, frame: bytes, tag: bytes) -> bool:
        """Whether ``tag`` is the next frame's; advances the sequence only when it is."""
        expected = self._gmac(_NONCE.pack(0, self._seq), b"", frame)
        if not hmac.compare_digest(expected, tag):
            return False
        self._seq += 1
        return True
