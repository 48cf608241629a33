"""TLS for the daemons' connections: one private CA and one certificate per topology.

``make_topology_tls`` runs once, at submit. It makes a CA (EC P-256, self-signed, CA:TRUE,
pathlen 0, valid 10 years) and signs ONE certificate with it, which every daemon of the
topology presents, as a server and as a client. The CA's private key is thrown away as soon
as that certificate is signed: nothing else can ever be issued under the CA, so a peer whose
chain verifies against the topology's CA holds the topology's certificate. The material
(``TlsMaterial``: the CA certificate, the certificate and its key, all PEM) is stored by the
state manager next to the topology secret (``set_tls``/``get_tls``), as privately.

The certificate names the topology, not a host: its only SAN is the DNS name
``server_name(topology)`` (``heron-py.<topology>``), which clients check (``server_hostname``
at connect), since containers move between hosts and their addresses are not known at submit.

``server_context``/``client_context`` build mutual-TLS contexts: TLS 1.2 or newer (OpenSSL
picks 1.3 when both sides have it), the peer's certificate required on both sides, verified
against the topology's CA only (no system CAs). The HMAC handshake on the topology secret
still runs inside the TLS channel (``heron_py.common.net``): both layers.

Loading the key: ``ssl`` loads a certificate chain and key from a path only. The key is
written encrypted (PKCS#8, under a random one-time password passed to ``load_cert_chain``)
into an anonymous in-memory file (``memfd_create``, opened through ``/proc/self/fd``), which
has no name in any file system and is closed right after loading. Where that is not
available, the same encrypted PEM goes to a private temporary directory (0700, file 0600)
that is deleted right after loading. Either way the key in clear never reaches a file.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import re
import secrets
import shutil
import ssl
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

# cryptography is imported where a certificate is made or read, not here: every daemon imports
# this module, and with TLS off (the default) cryptography's import would put about 4 MB of its
# compiled library in memory in each container's executor for nothing (bench/idle_memory.py)
if TYPE_CHECKING:
    from cryptography import x509

FORMAT = "heron-py-tls/1"
VALIDITY = datetime.timedelta(days=3650)
# hosts' clocks differ a little: a certificate made on one host is valid on another at once
CLOCK_SKEW = datetime.timedelta(hours=1)
NAME_PREFIX = "heron-py."
# TLS 1.2 suites (TLS 1.3's are OpenSSL's defaults, all AEAD): forward secrecy and AEAD only
TLS12_CIPHERS = "ECDHE+AESGCM:ECDHE+CHACHA20"

_LABEL = re.compile(r"^[A-Za-z0-9_-]{1,63}$")


@dataclass(frozen=True)
class TlsMaterial:
    """A topology's TLS material, PEM: the CA certificate, the certificate, its private key."""

    ca_cert: bytes
    cert: bytes
    key: bytes

    def to_bytes(self) -> bytes:
        doc = {"format": FORMAT, "ca_cert": self.ca_cert.decode("ascii"), "cert": self.cert.decode("ascii"),
               "key": self.key.decode("ascii")}
        return json.dumps(doc, sort_keys=True).encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> TlsMaterial:
        try:
            doc = json.loads(data)
        except (ValueError, UnicodeDecodeError) as e:
            raise ValueError(f"TLS material: expected a JSON document, found {data[:40]!r}: {e}") from None
        if not isinstance(doc, dict) or doc.get("format") != FORMAT:
            found = doc.get("format") if isinstance(doc, dict) else type(doc).__name__
            raise ValueError(f"TLS material: expected format {FORMAT!r}, found {found!r}")
        fields = {}
        for name, marker in (("ca_cert", "CERTIFICATE"), ("cert", "CERTIFICATE"), ("key", "PRIVATE KEY")):
            value = doc.get(name)
            if not isinstance(value, str) or f"-----BEGIN {marker}-----" not in value:
                raise ValueError(f"TLS material: field {name!r} is missing or not a PEM {marker.lower()}")
            fields[name] = value.encode("ascii")
        return cls(**fields)


def server_name(topology: str) -> str:
    """The DNS name in the topology's certificate, checked by clients: ``heron-py.<topology>``.
    A topology name that is no valid DNS name (a label longer than 63, an empty label, a
    name too long) is replaced by a hash of it, so every topology name gets a usable one."""
    labels = topology.split(".")
    name = NAME_PREFIX + topology
    if all(_LABEL.match(label) for label in labels) and len(name) <= 253:
        return name
    return f"{NAME_PREFIX}t-{hashlib.sha256(topology.encode()).hexdigest()[:40]}"


def _cn(text: str) -> x509.Name:
    from cryptography import x509
    from cryptography.x509.oid import NameOID

    # a common name holds at most 64 characters; the SAN is what peers check
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "heron-py"),
                      x509.NameAttribute(NameOID.COMMON_NAME, text[:64])])


def make_topology_tls(topology: str) -> TlsMaterial:
    """A fresh CA and the topology's certificate signed by it (see the module docstring)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID

    now = datetime.datetime.now(datetime.UTC)
    not_before, not_after = now - CLOCK_SKEW, now + VALIDITY
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _cn(f"heron-py CA {topology}")
    ca_ski = x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key())
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=False, content_commitment=False, key_encipherment=False,
                                     data_encipherment=False, key_agreement=False, key_cert_sign=True,
                                     crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
        .add_extension(ca_ski, critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    name = server_name(topology)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_cn(name))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False, key_encipherment=False,
                                     data_encipherment=False, key_agreement=False, key_cert_sign=False,
                                     crl_sign=False, encipher_only=False, decipher_only=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
                       critical=False)
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_ski), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    del ca_key  # never stored: nothing else can be signed under this CA
    pem = serialization.Encoding.PEM
    return TlsMaterial(
        ca_cert=ca_cert.public_bytes(pem),
        cert=cert.public_bytes(pem),
        key=key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()),
    )


@contextmanager
def _key_file(data: bytes) -> Iterator[str]:
    """A path that reads ``data`` while the block runs, then is gone (module docstring)."""
    if hasattr(os, "memfd_create") and os.path.isdir("/proc/self/fd"):
        fd = os.memfd_create("heron-py-tls", getattr(os, "MFD_CLOEXEC", 0))
        try:
            os.write(fd, data)
            yield f"/proc/self/fd/{fd}"
        finally:
            os.close(fd)
        return
    tmp = tempfile.mkdtemp(prefix="heron-py-tls-")  # mode 0700
    try:
        path = os.path.join(tmp, "chain.pem")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        yield path
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _load_cert_chain(ctx: ssl.SSLContext, material: TlsMaterial) -> None:
    from cryptography.hazmat.primitives import serialization

    password = secrets.token_bytes(32)
    key = serialization.load_pem_private_key(material.key, password=None)
    encrypted = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                  serialization.BestAvailableEncryption(password))
    with _key_file(material.cert + encrypted) as path:
        ctx.load_cert_chain(path, password=password)


def _context(protocol: ssl._SSLMethod, material: TlsMaterial) -> ssl.SSLContext:
    ctx = ssl.SSLContext(protocol)  # a bare context: no system CAs are loaded
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.maximum_version = ssl.TLSVersion.MAXIMUM_SUPPORTED
    ctx.set_ciphers(TLS12_CIPHERS)
    ctx.verify_mode = ssl.CERT_REQUIRED
    ctx.verify_flags |= ssl.VERIFY_X509_STRICT
    ctx.load_verify_locations(cadata=material.ca_cert.decode("ascii"))
    _load_cert_chain(ctx, material)
    return ctx


def server_context(material: TlsMaterial) -> ssl.SSLContext:
    """For ``net.serve(ssl=...)``: presents the topology's certificate and requires the
    client's, verified against the topology's CA."""
    return _context(ssl.PROTOCOL_TLS_SERVER, material)


def client_context(material: TlsMaterial, topology: str) -> ssl.SSLContext:
    """For ``net.connect(ssl=..., server_hostname=server_name(topology))``: presents the
    topology's certificate, verifies the server's against the topology's CA and checks its
    name. Raises ValueError when ``material`` is not ``topology``'s."""
    from cryptography import x509

    name = server_name(topology)
    cert = x509.load_pem_x509_certificate(material.cert)
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(
        x509.DNSName)
    if name not in sans:
        raise ValueError(f"TLS material is for {', '.join(sans) or 'no name'}, not for topology {topology!r} "
                         f"({name})")
    ctx = _context(ssl.PROTOCOL_TLS_CLIENT, material)
    ctx.check_hostname = True
    return ctx


def http_server_context(material: TlsMaterial) -> ssl.SSLContext:
    """For the HTTP API and the metrics endpoint when TLS is on: presents the topology's
    certificate and asks for none (browsers and Prometheus have no client certificate; the
    bearer token authenticates the request, and TLS keeps it from crossing in clear)."""
    ctx = _context(ssl.PROTOCOL_TLS_SERVER, material)
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


def https_client_context(material: TlsMaterial) -> ssl.SSLContext:
    """For the CLI's HTTPS requests to a topology's master: verifies the server's chain
    against the topology's CA, without a name check. The name adds nothing here: the CA's key
    is dropped once the topology's one certificate is signed (``make_topology_tls``), so a
    chain that verifies is that certificate; and urllib would check the name against the
    address in the URL, which the certificate does not carry."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # a bare context: no system CAs
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.set_ciphers(TLS12_CIPHERS)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_REQUIRED
    ctx.verify_flags |= ssl.VERIFY_X509_STRICT
    ctx.load_verify_locations(cadata=material.ca_cert.decode("ascii"))
    return ctx


@dataclass(frozen=True)
class PeerTls:
    """What a daemon needs for TLS, built once: the server context (its listening port), the
    client context and the name to check, and the HTTP server's context (no client
    certificate asked)."""

    server: ssl.SSLContext
    client: ssl.SSLContext
    name: str
    http: ssl.SSLContext

    @classmethod
    def of(cls, material: TlsMaterial, topology: str) -> PeerTls:
        return cls(server_context(material), client_context(material, topology), server_name(topology),
                   http_server_context(material))

    @classmethod
    def load(cls, path: Path | None, topology: str) -> PeerTls | None:
        """From the file an executor wrote (``--tls-file``); None when TLS is off."""
        if path is None:
            return None
        return cls.of(TlsMaterial.from_bytes(path.read_bytes()), topology)


def tls_client_args(tls: PeerTls | None) -> dict[str, Any]:
    """``connect``'s keyword arguments for a client with (or without) the topology's TLS."""
    return {"ssl": tls.client, "server_hostname": tls.name} if tls is not None else {}
