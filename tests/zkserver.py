"""A real ZooKeeper server (Debian's zookeeper package) on a free port, for tests.

Started with zkServer.sh and a private zoo.cfg, as an operator would without systemd; tests
can stop and start it again mid-run (same dataDir, so sessions and nodes survive as they do
on a real restart).

With ``tls=make_pki(folder)`` the server has only a secure client port (Netty, PEM key and
trust stores, client certificates required) and no plaintext port at all.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import shutil
import socket
import ssl
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

ZK_SERVER = Path("/usr/share/zookeeper/bin/zkServer.sh")
# a short tick lets sessions be as short as 1 s (ZooKeeper allows 2 to 20 ticks)
TICK_MS = 500
DEBIAN_CLASSPATH = "/etc/zookeeper/conf:/usr/share/java/zookeeper.jar"
NETTY_CODEC = Path("/usr/share/java/netty-codec.jar")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def missing_tools() -> str | None:
    """Why a real ZooKeeper cannot run here, or None."""
    if not ZK_SERVER.exists():
        return f"{ZK_SERVER} is missing (apt-get install -y zookeeper)"
    if shutil.which("java") is None:
        return "java is missing (apt-get install -y default-jre-headless)"
    return None


def missing_tls_tools() -> str | None:
    """Why a ZooKeeper with a TLS port cannot run here, or None."""
    if not NETTY_CODEC.exists():
        return f"{NETTY_CODEC} is missing (apt-get install -y libnetty-java): ZooKeeper's TLS port needs it"
    return missing_tools()


@dataclass(frozen=True)
class Pki:
    """PEM files for a TLS test: a CA, the server's key and certificate in one file (ZooKeeper's
    PEM key store), a client certificate and key signed by the same CA, and a second CA that
    signed nothing here (a client trusting only it must refuse the server)."""

    ca: Path
    server_pem: Path
    client_cert: Path
    client_key: Path
    other_ca: Path


def _key():  # type: ignore[no-untyped-def]
    from cryptography.hazmat.primitives.asymmetric import ec

    return ec.generate_private_key(ec.SECP256R1())


def _cert(subject: str, key, issuer: str, issuer_key, *, ca: bool, sans: tuple[str, ...] = ()):  # type: ignore[no-untyped-def]
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.UTC)
    b = (x509.CertificateBuilder()
         .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
         .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer)]))
         .public_key(key.public_key()).serial_number(x509.random_serial_number())
         .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=2))
         .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if ca:
        b = b.add_extension(x509.KeyUsage(True, False, False, False, False, True, True, False, False), critical=True)
    if sans:
        names: list[x509.GeneralName] = []
        for n in sans:
            try:
                names.append(x509.IPAddress(ipaddress.ip_address(n)))
            except ValueError:
                names.append(x509.DNSName(n))
        b = b.add_extension(x509.SubjectAlternativeName(names), critical=False)
    return b.sign(issuer_key, hashes.SHA256())


def make_pki(folder: Path, server_names: tuple[str, ...] = ("127.0.0.1", "localhost")) -> Pki:
    from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat

    folder.mkdir(parents=True, exist_ok=True)

    def pem_key(k) -> bytes:  # type: ignore[no-untyped-def]
        # PKCS#8 unencrypted: what ZooKeeper's PEM loader reads
        return bytes(k.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption()))

    ca_key, other_key, server_key, client_key = _key(), _key(), _key(), _key()
    ca = _cert("heron-py test CA", ca_key, "heron-py test CA", ca_key, ca=True)
    other = _cert("another CA", other_key, "another CA", other_key, ca=True)
    server = _cert("zookeeper", server_key, "heron-py test CA", ca_key, ca=False, sans=server_names)
    client = _cert("heron-py", client_key, "heron-py test CA", ca_key, ca=False)
    pki = Pki(ca=folder / "ca.pem", server_pem=folder / "server.pem", client_cert=folder / "client.pem",
              client_key=folder / "client.key", other_ca=folder / "other-ca.pem")
    pki.ca.write_bytes(ca.public_bytes(Encoding.PEM))
    pki.other_ca.write_bytes(other.public_bytes(Encoding.PEM))
    pki.server_pem.write_bytes(pem_key(server_key) + server.public_bytes(Encoding.PEM))
    pki.client_cert.write_bytes(client.public_bytes(Encoding.PEM))
    pki.client_key.write_bytes(pem_key(client_key))
    for f in (pki.server_pem, pki.client_key):
        f.chmod(0o600)
    return pki


class ZkServer:
    def __init__(self, base: Path, tls: Pki | None = None) -> None:
        self.base = base
        self.tls = tls
        self.port = free_port()
        self.data = base / "data"
        self.data.mkdir(parents=True, exist_ok=True)
        self.cfg = base / "zoo.cfg"
        # forceSync=no: a session's creation waits for its log write, and behind other tests'
        # disk traffic an fsync took longer than a client's 5 s connect timeout; a restart of
        # the server process (all the tests do) keeps what the page cache holds
        common = (f"tickTime={TICK_MS}\ndataDir={self.data}\nforceSync=no\n"
                  "admin.enableServer=false\n4lw.commands.whitelist=ruok\nmaxClientCnxns=200\n")
        if tls is None:
            self.cfg.write_text(f"{common}clientPort={self.port}\nclientPortAddress=127.0.0.1\n")
            return
        # keys ZooKeeper does not know as its own become zookeeper.* system properties; the PEM
        # stores need ZooKeeper 3.8 or later
        self.cfg.write_text(
            f"{common}secureClientPort={self.port}\nsecureClientPortAddress=127.0.0.1\n"
            "serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory\n"
            f"ssl.keyStore.location={tls.server_pem}\nssl.keyStore.type=PEM\n"
            f"ssl.trustStore.location={tls.ca}\nssl.trustStore.type=PEM\n")

    def client_context(self) -> ssl.SSLContext:
        """A TLS context that the server accepts (its CA, the client certificate), for the
        liveness probe: it does not check the host name, which the certificate may not hold."""
        assert self.tls is not None
        ctx = ssl.create_default_context(cafile=str(self.tls.ca))
        ctx.check_hostname = False
        ctx.load_cert_chain(str(self.tls.client_cert), str(self.tls.client_key))
        return ctx

    @property
    def hosts(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _run(self, action: str) -> None:
        env = dict(os.environ, ZOO_LOG_DIR=str(self.base), ZOOPIDFILE=str(self.base / "zk.pid"))
        if self.tls is not None:
            # Debian 12's zookeeper 3.8.0 leaves netty-codec off the class path its jar names, and
            # the Netty factory that serves TLS needs it; zkEnv.sh fixes CLASSPATH, but java takes
            # the last -cp it is given, and zkServer.sh puts SERVER_JVMFLAGS after its own
            env["SERVER_JVMFLAGS"] = f"-cp {DEBIAN_CLASSPATH}:{NETTY_CODEC}"
        subprocess.run([str(ZK_SERVER), action, str(self.cfg)], env=env, check=True, capture_output=True,
                       timeout=60)

    def ruok(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as raw:
                s = self.client_context().wrap_socket(raw, server_hostname="127.0.0.1") if self.tls else raw
                s.sendall(b"ruok")
                return s.recv(8) == b"imok"
        except OSError:
            return False

    def start(self, timeout: float = 60.0) -> None:
        self._run("start")
        deadline = time.monotonic() + timeout
        while not self.ruok():
            if time.monotonic() > deadline:
                log = "\n".join(p.read_text(errors="replace")[-3000:] for p in self.base.glob("*.out"))
                raise RuntimeError(f"ZooKeeper did not answer ruok on {self.hosts} within {timeout:g} s:\n{log}")
            time.sleep(0.2)

    def stop(self) -> None:
        self._run("stop")
        deadline = time.monotonic() + 30
        while self.ruok() and time.monotonic() < deadline:
            time.sleep(0.1)


def raw_client(hosts: str):
    """A plain kazoo client with heron-py's credential (the file $HERON_PY_ZK_AUTH_FILE names,
    as the zk fixture sets it): heron-py's nodes admit nobody else."""
    from kazoo.client import KazooClient

    from heron_py.state.zookeeper import load_credential

    user, password = load_credential(Path(os.environ["HERON_PY_ZK_AUTH_FILE"]))
    return KazooClient(hosts=hosts, auth_data=[("digest", f"{user}:{password}")])
